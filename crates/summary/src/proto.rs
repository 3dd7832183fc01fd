//! The protobuf messages of TensorFlow's event files (`tensorflow/core/util/event.proto`,
//! `tensorflow/core/framework/summary.proto`), reduced to the fields this crate writes and
//! reads. Field numbers are TensorFlow's; prost encodes them.

/// One record of an event file.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The training step.
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// What the event holds.
    #[prost(oneof = "event::What", tags = "3, 5")]
    pub what: Option<event::What>,
}

pub(crate) mod event {
    /// The payload of an [`Event`](super::Event).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum What {
        /// The file format version, in the first event of a file (`brain.Event:2`).
        #[prost(string, tag = "3")]
        FileVersion(String),
        /// Summary values.
        #[prost(message, tag = "5")]
        Summary(super::Summary),
    }
}

/// Summary values of one step.
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// One tagged value (`Summary.Value`).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct SummaryValue {
    #[prost(string, tag = "1")]
    pub tag: String,
    #[prost(oneof = "summary_value::Value", tags = "2, 5")]
    pub value: Option<summary_value::Value>,
}

pub(crate) mod summary_value {
    /// The value of a [`SummaryValue`](super::SummaryValue).
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(crate) enum Value {
        /// A scalar (TensorBoard's Scalars dashboard).
        #[prost(float, tag = "2")]
        SimpleValue(f32),
        /// A histogram (the Histograms and Distributions dashboards).
        #[prost(message, tag = "5")]
        Histo(super::HistogramProto),
    }
}

/// A histogram: bucket `i` counts the values in `[bucket_limit[i-1], bucket_limit[i])`
/// (the first from minus infinity).
#[derive(Clone, PartialEq, prost::Message)]
pub(crate) struct HistogramProto {
    #[prost(double, tag = "1")]
    pub min: f64,
    #[prost(double, tag = "2")]
    pub max: f64,
    #[prost(double, tag = "3")]
    pub num: f64,
    #[prost(double, tag = "4")]
    pub sum: f64,
    #[prost(double, tag = "5")]
    pub sum_squares: f64,
    #[prost(double, repeated, tag = "6")]
    pub bucket_limit: Vec<f64>,
    #[prost(double, repeated, tag = "7")]
    pub bucket: Vec<f64>,
}
