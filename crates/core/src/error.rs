//! The one error type of the workspace.
//!
//! Every variant carries the public function that refused the call and the argument at
//! fault, and says what was expected and what came, so that a message reads like
//! `gae: argument `lambda` is invalid: expected a finite value in [0, 1], got 1.5`.
//! `std::io::Error` converts into it ([`Error::ForeignIo`]), so that `?` works on file
//! work in a function that returns [`Result`].

use std::fmt::Display;
use std::sync::Arc;

/// `Result` with [`Error`] as the error type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Errors of every rlgrad crate.
///
/// The variants group errors by what a caller has to fix; all of them name the public
/// function (`function`) and the argument (`argument`) that were at fault, but for
/// [`Error::ForeignIo`], an I/O error of the caller's own code.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument has the wrong shape, length or layout.
    #[error(
        "{function}: argument `{argument}` has the wrong shape: expected {expected}, got {got}"
    )]
    Shape {
        /// The public function that refused the call.
        function: &'static str,
        /// The argument at fault.
        argument: &'static str,
        /// The shape, length or layout it takes.
        expected: String,
        /// What it was given.
        got: String,
    },
    /// An argument's value is outside its domain (a negative learning rate, gamma > 1, NaN).
    #[error("{function}: argument `{argument}` is invalid: expected {expected}, got {got}")]
    Value {
        /// The public function that refused the call.
        function: &'static str,
        /// The argument at fault.
        argument: &'static str,
        /// The domain it takes.
        expected: String,
        /// The value it was given.
        got: String,
    },
    /// An index, axis or length is out of range.
    #[error("{function}: argument `{argument}` is out of range: expected {expected}, got {got}")]
    OutOfRange {
        /// The public function that refused the call.
        function: &'static str,
        /// The argument at fault.
        argument: &'static str,
        /// The range it takes.
        expected: String,
        /// The index, axis or length it was given.
        got: String,
    },
    /// An operation that has no value for zero elements was given none.
    #[error("{function}: argument `{argument}` is empty: expected {expected}")]
    Empty {
        /// The public function that refused the call.
        function: &'static str,
        /// The empty argument.
        argument: &'static str,
        /// How many elements it needs.
        expected: String,
    },
    /// An opt-in finiteness check found a NaN or an infinity.
    #[error("{function}: argument `{argument}` holds a non-finite value at index {index}: {value}")]
    NonFinite {
        /// The public function that refused the call.
        function: &'static str,
        /// The argument holding the value.
        argument: &'static str,
        /// The index of the first non-finite value.
        index: usize,
        /// That value.
        value: f64,
    },
    /// Saved state (optimizer slots, a checkpoint) does not fit what it is loaded into.
    #[error("{function}: argument `{argument}` does not match: expected {expected}, got {got}")]
    State {
        /// The public function that refused the state.
        function: &'static str,
        /// The state or part of it that does not fit.
        argument: &'static str,
        /// What the receiver holds.
        expected: String,
        /// What the state holds.
        got: String,
    },
    /// A file or directory could not be read or written (permissions, a full disk, a
    /// missing path); `path` names it and `cause` is the operating system's error, the
    /// error's [`source`](std::error::Error::source).
    #[error("{function}: cannot {action} `{path}`: {cause}")]
    Io {
        /// The public function whose file operation failed.
        function: &'static str,
        /// What it attempted (`"write"`, `"rename"`).
        action: &'static str,
        /// The file or directory.
        path: String,
        /// The operating system's error (a `std::io::Error`).
        #[source]
        cause: Cause,
    },
    /// An I/O error of the caller's own code, converted by `?` in a function returning
    /// `rlgrad_core::Result` (`From<std::io::Error>`); its function is `std::io`.
    /// rlgrad's own file operations report [`Error::Io`], which names the file.
    #[error("std::io: {cause} ({kind:?})")]
    ForeignIo {
        /// The kind of the original error.
        kind: std::io::ErrorKind,
        /// The original error, the error's [`source`](std::error::Error::source).
        #[source]
        cause: Cause,
    },
    /// The device failed (allocation, transfer, kernel launch, a collective).
    #[error("{function}: device `{device}` failed: {message}")]
    Device {
        /// The public function whose device call failed.
        function: &'static str,
        /// The device, as it names itself.
        device: String,
        /// The device's reason.
        message: String,
        /// The driver's or library's own error, where there is one (the error's
        /// [`source`](std::error::Error::source)).
        #[source]
        cause: Option<Cause>,
    },
}

impl Error {
    /// An argument has the wrong shape or length.
    pub fn shape(
        function: &'static str,
        argument: &'static str,
        expected: impl Display,
        got: impl Display,
    ) -> Self {
        Self::Shape {
            function,
            argument,
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    /// An argument's value is outside its domain.
    pub fn value(
        function: &'static str,
        argument: &'static str,
        expected: impl Display,
        got: impl Display,
    ) -> Self {
        Self::Value {
            function,
            argument,
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    /// An index, axis or length is out of range.
    pub fn out_of_range(
        function: &'static str,
        argument: &'static str,
        expected: impl Display,
        got: impl Display,
    ) -> Self {
        Self::OutOfRange {
            function,
            argument,
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    /// An operation without a value for zero elements was given none.
    pub fn empty(function: &'static str, argument: &'static str, expected: impl Display) -> Self {
        Self::Empty {
            function,
            argument,
            expected: expected.to_string(),
        }
    }

    /// Saved state does not fit what it is loaded into.
    pub fn state(
        function: &'static str,
        argument: &'static str,
        expected: impl Display,
        got: impl Display,
    ) -> Self {
        Self::State {
            function,
            argument,
            expected: expected.to_string(),
            got: got.to_string(),
        }
    }

    /// The same error reported by `function` instead: for a public function that
    /// delegates its checks to another (a `Var` op to the `Tensor` op it runs), so that the
    /// message names what the caller called.
    pub fn in_function(mut self, function: &'static str) -> Self {
        match &mut self {
            Self::Shape { function: f, .. }
            | Self::Value { function: f, .. }
            | Self::OutOfRange { function: f, .. }
            | Self::Empty { function: f, .. }
            | Self::NonFinite { function: f, .. }
            | Self::State { function: f, .. }
            | Self::Device { function: f, .. }
            | Self::Io { function: f, .. } => *f = function,
            Self::ForeignIo { .. } => {}
        }
        self
    }

    /// A file operation failed: `action` is what was attempted (`"write"`, `"rename"`).
    pub fn io(
        function: &'static str,
        action: &'static str,
        path: &std::path::Path,
        error: std::io::Error,
    ) -> Self {
        Self::Io {
            function,
            action,
            path: path.display().to_string(),
            cause: Cause::new(error),
        }
    }

    /// The public function named in the error.
    pub fn function(&self) -> &'static str {
        match self {
            Self::Shape { function, .. }
            | Self::Value { function, .. }
            | Self::OutOfRange { function, .. }
            | Self::Empty { function, .. }
            | Self::NonFinite { function, .. }
            | Self::State { function, .. }
            | Self::Io { function, .. }
            | Self::Device { function, .. } => function,
            Self::ForeignIo { .. } => "std::io",
        }
    }

    /// The argument named in the error (`None` for file and device failures).
    pub fn argument(&self) -> Option<&'static str> {
        match self {
            Self::Shape { argument, .. }
            | Self::Value { argument, .. }
            | Self::OutOfRange { argument, .. }
            | Self::Empty { argument, .. }
            | Self::NonFinite { argument, .. }
            | Self::State { argument, .. } => Some(argument),
            Self::Io { .. } | Self::ForeignIo { .. } | Self::Device { .. } => None,
        }
    }
}

/// `?` on file work in a function that returns `rlgrad_core::Result`.
///
/// ```
/// fn read_config(path: &str) -> rlgrad_core::Result<String> {
///     Ok(std::fs::read_to_string(path)?)
/// }
/// let err = read_config("/no/such/rlgrad/config.json").unwrap_err();
/// assert_eq!(err.function(), "std::io");
/// assert!(matches!(err, rlgrad_core::Error::ForeignIo { kind: std::io::ErrorKind::NotFound, .. }));
/// ```
impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Self {
        Self::ForeignIo {
            kind: error.kind(),
            cause: Cause::new(error),
        }
    }
}

/// The error underneath an [`Error`] (the operating system's `std::io::Error`), kept so
/// that [`std::error::Error::source`] reaches it and [`Cause::get`] can downcast it. Shared,
/// so that [`Error`] stays `Clone`; two causes are equal when their messages are.
///
/// ```
/// use std::error::Error as _;
/// let e = rlgrad_core::Error::io(
///     "Checkpoint::save",
///     "create",
///     std::path::Path::new("/ckpt/a.tmp"),
///     std::io::Error::from(std::io::ErrorKind::PermissionDenied),
/// );
/// let cause = e.source().expect("the OS error is the source");
/// assert_eq!(cause.to_string(), "permission denied");
/// let rlgrad_core::Error::Io { cause, .. } = &e else { unreachable!() };
/// let io = cause.get().downcast_ref::<std::io::Error>().unwrap();
/// assert_eq!(io.kind(), std::io::ErrorKind::PermissionDenied);
/// ```
#[derive(Debug, Clone)]
pub struct Cause(Arc<dyn std::error::Error + Send + Sync>);

impl Cause {
    /// `error` as a cause.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self(Arc::new(error))
    }

    /// The error itself.
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl Display for Cause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Cause {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

impl PartialEq for Cause {
    fn eq(&self, other: &Self) -> bool {
        self.to_string() == other.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_function_argument_expectation_and_value() {
        let e = Error::value("gae", "lambda", "a finite value in [0, 1]", 1.5);
        assert_eq!(
            e.to_string(),
            "gae: argument `lambda` is invalid: expected a finite value in [0, 1], got 1.5"
        );
        assert_eq!(e.function(), "gae");
        assert_eq!(e.argument(), Some("lambda"));
        let e = Error::shape(
            "Tensor::add",
            "rhs",
            "a shape broadcastable to [2, 3]",
            "[4]",
        );
        assert!(e.to_string().contains("Tensor::add: argument `rhs`"));
        let e = Error::io(
            "Checkpoint::save",
            "create",
            std::path::Path::new("/ckpt/a.tmp"),
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        );
        assert_eq!(
            e.to_string(),
            "Checkpoint::save: cannot create `/ckpt/a.tmp`: permission denied"
        );
        assert_eq!(e.argument(), None);
    }

    #[test]
    fn causes_are_sources_and_compare_by_message() {
        use std::error::Error as _;
        use std::io::ErrorKind;
        let foreign = |kind| Error::from(std::io::Error::from(kind));
        let not_found = foreign(ErrorKind::NotFound);
        assert_eq!(not_found.source().unwrap().to_string(), "entity not found");
        assert_eq!(not_found.clone(), not_found);
        assert_ne!(not_found, foreign(ErrorKind::PermissionDenied));
        let device = |cause| Error::Device {
            function: "Cuda::launch",
            device: "cuda:0".to_owned(),
            message: "launch failed".to_owned(),
            cause,
        };
        let driver = device(Some(Cause::new(std::io::Error::other(
            "CUDA_ERROR_LAUNCH_FAILED",
        ))));
        assert_eq!(
            driver.source().unwrap().to_string(),
            "CUDA_ERROR_LAUNCH_FAILED"
        );
        assert!(device(None).source().is_none());
        assert_eq!(
            driver.to_string(),
            "Cuda::launch: device `cuda:0` failed: launch failed"
        );
    }
}
