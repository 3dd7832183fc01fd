//! Each built-in rule's hyper-parameters, listed once ([`Builtin::HYPERPARAMETERS`]).
//!
//! The table is the one source: the rule's checks ([`Rule::validate`](crate::Rule::validate))
//! and its exported values ([`Rule::hyperparameters`](crate::Rule::hyperparameters)) read
//! it, and so do bindings that build a rule by name: the Python package takes its keywords,
//! their types, defaults and error messages from it, and its tests hold `optim.py` and
//! `optim.pyi` to it.

use std::fmt;

use rlgrad_core::{Error, Result, check};

/// The value of a hyper-parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value {
    /// A number (`beta1`, `eps`).
    Number(f64),
    /// An option that is on or off (`amsgrad`, `nesterov`).
    Switch(bool),
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Number(v) => write!(f, "{v}"),
            Self::Switch(on) => write!(f, "{on}"),
        }
    }
}

/// The values a hyper-parameter takes. Numbers must also be finite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Domain {
    /// `true` or `false`.
    Switch,
    /// A number `>= 0` (weight decay).
    NonNegative,
    /// A number `> 0` (epsilons).
    Positive,
    /// A number in `[0, 1]` (dampening).
    UnitInterval,
    /// A number in `[0, 1)` (betas, momentum).
    UnitIntervalOpen,
}

impl Domain {
    /// `Ok` when `value` lies in the domain; else an error naming `function` and
    /// `argument`, with the messages of `rlgrad_core::check`.
    pub fn check(self, function: &'static str, argument: &'static str, value: Value) -> Result<()> {
        match (self, value) {
            (Self::Switch, Value::Switch(_)) => Ok(()),
            (Self::Switch, Value::Number(v)) => {
                Err(Error::value(function, argument, "true or false", v))
            }
            (_, Value::Switch(on)) => Err(Error::value(function, argument, "a number", on)),
            (Self::NonNegative, Value::Number(v)) => check::non_negative(function, argument, v),
            (Self::Positive, Value::Number(v)) => check::positive(function, argument, v),
            (Self::UnitInterval, Value::Number(v)) => check::unit_interval(function, argument, v),
            (Self::UnitIntervalOpen, Value::Number(v)) => {
                check::unit_interval_open(function, argument, v)
            }
        }
    }
}

/// One hyper-parameter of the built-in rule `R`: a field of `R`, its name and its domain.
pub struct Hyperparameter<R> {
    /// The field's name, which is also the keyword of the bindings (`"beta1"`).
    pub name: &'static str,
    /// The values it takes, checked when the rule joins an optimizer.
    pub domain: Domain,
    pub(crate) get: fn(&R) -> Value,
    /// Stores a value of the field's kind; `false`, changing nothing, for the other kind.
    pub(crate) set: fn(&mut R, Value) -> bool,
}

impl<R> fmt::Debug for Hyperparameter<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hyperparameter")
            .field("name", &self.name)
            .field("domain", &self.domain)
            .finish()
    }
}

impl<R: Builtin> Hyperparameter<R> {
    /// Its value in `rule`.
    pub fn get(&self, rule: &R) -> Value {
        (self.get)(rule)
    }

    /// Sets it in `rule`; an error, changing nothing, for a value of the other kind (a
    /// number for a switch). The domain is checked when the rule joins an optimizer.
    pub fn set(&self, rule: &mut R, value: Value) -> Result<()> {
        if (self.set)(rule, value) {
            Ok(())
        } else {
            let expected = match self.domain {
                Domain::Switch => "true or false",
                _ => "a number",
            };
            Err(Error::value(R::TYPE, self.name, expected, value))
        }
    }
}

/// A flavor's name and a function giving its defaults (an entry of [`Builtin::FLAVORS`]).
pub type FlavorDefaults<R> = (&'static str, fn() -> R);

/// A built-in rule as data: its name, its flavors with their defaults, and its
/// hyper-parameters. What a binding or a configuration file needs to build one by name.
///
/// ```
/// use rlgrad_optim::{Adam, Builtin, Value};
///
/// let (flavor, defaults) = Adam::FLAVORS[0];
/// let mut adam = defaults();
/// let beta1 = Adam::HYPERPARAMETERS.iter().find(|h| h.name == "beta1").unwrap();
/// beta1.set(&mut adam, Value::Number(0.8))?;
/// assert_eq!((flavor, adam.beta1, adam.eps), ("torch", 0.8, 1e-8));
/// assert!(beta1.set(&mut adam, Value::Switch(true)).is_err());
/// # Ok::<(), rlgrad_optim::Error>(())
/// ```
pub trait Builtin: Sized + 'static {
    /// The rule's stable name, its [`Rule::name`](crate::Rule::name) (`"adam"`).
    const NAME: &'static str;
    /// The type's name, which the errors of the rule's checks name (`"Adam"`).
    const TYPE: &'static str;
    /// The flavors by name (`"torch"`, `"keras"`, `"core"`), each with its defaults; the
    /// first is the default flavor. A rule that follows one framework has one, `"torch"`.
    const FLAVORS: &'static [FlavorDefaults<Self>];
    /// The hyper-parameters, in the order of the type's fields.
    const HYPERPARAMETERS: &'static [Hyperparameter<Self>];
}

/// Every hyper-parameter of `rule` checked against its domain, in the table's order.
pub(crate) fn check_domains<R: Builtin>(rule: &R) -> Result<()> {
    R::HYPERPARAMETERS
        .iter()
        .try_for_each(|h| h.domain.check(R::TYPE, h.name, h.get(rule)))
}

/// The numeric hyper-parameters of `rule` by name, in the table's order.
pub(crate) fn numbers<R: Builtin>(rule: &R) -> Vec<(&'static str, f64)> {
    R::HYPERPARAMETERS
        .iter()
        .filter_map(|h| match h.get(rule) {
            Value::Number(v) => Some((h.name, v)),
            Value::Switch(_) => None,
        })
        .collect()
}

/// A field's kind: a number or a switch.
pub(crate) trait Field: Sized {
    fn value(self) -> Value;
    fn from_value(value: Value) -> Option<Self>;
}

impl Field for f64 {
    fn value(self) -> Value {
        Value::Number(self)
    }
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Number(v) => Some(v),
            Value::Switch(_) => None,
        }
    }
}

impl Field for bool {
    fn value(self) -> Value {
        Value::Switch(self)
    }
    fn from_value(value: Value) -> Option<Self> {
        match value {
            Value::Switch(on) => Some(on),
            Value::Number(_) => None,
        }
    }
}

/// A [`Builtin::HYPERPARAMETERS`] table from the fields' names and domains:
/// `hyperparameters![beta1: UnitIntervalOpen, amsgrad: Switch]`.
macro_rules! hyperparameters {
    ($($name:ident: $domain:ident),* $(,)?) => {
        &[$($crate::hyper::Hyperparameter {
            name: stringify!($name),
            domain: $crate::hyper::Domain::$domain,
            get: |rule| $crate::hyper::Field::value(rule.$name),
            set: |rule, value| match $crate::hyper::Field::from_value(value) {
                Some(v) => {
                    rule.$name = v;
                    true
                }
                None => false,
            },
        }),*]
    };
}

pub(crate) use hyperparameters;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Adagrad, Adam, AdamW, Momentum, Rmsprop, Rule, Sgd};

    /// A value just outside `domain` (of the other kind for a switch).
    fn outside(domain: Domain) -> Value {
        match domain {
            Domain::Switch => Value::Number(1.0),
            Domain::NonNegative | Domain::Positive | Domain::UnitInterval => Value::Number(-0.5),
            Domain::UnitIntervalOpen => Value::Number(1.0),
        }
    }

    /// Every flavor's defaults pass the checks and carry the flavor's name in their spec;
    /// every entry reads and writes its own field, and its domain is what the checks refuse.
    fn table_describes<R: Builtin + Rule<f64> + Clone>() {
        assert!(!R::FLAVORS.is_empty());
        for &(flavor, defaults) in R::FLAVORS {
            let rule = defaults();
            rule.validate().unwrap();
            let spec = rule.spec();
            assert_eq!(spec.name, R::NAME);
            assert_eq!(rule.name(), R::NAME);
            if R::FLAVORS.len() > 1 {
                assert_eq!(spec.flavor.as_deref(), Some(flavor));
            }
            for h in R::HYPERPARAMETERS {
                let mut changed = rule.clone();
                let value = match h.get(&rule) {
                    Value::Number(v) => Value::Number(v / 2.0 + 0.125),
                    Value::Switch(on) => Value::Switch(!on),
                };
                h.set(&mut changed, value).unwrap();
                assert_eq!(h.get(&changed), value, "{}.{}", R::NAME, h.name);
                for other in R::HYPERPARAMETERS.iter().filter(|o| o.name != h.name) {
                    assert_eq!(
                        other.get(&changed),
                        other.get(&rule),
                        "{}.{}",
                        R::NAME,
                        h.name
                    );
                }
                if h.domain == Domain::Switch {
                    assert!(h.set(&mut changed, Value::Number(1.0)).is_err());
                    continue;
                }
                assert!(h.set(&mut changed, Value::Switch(true)).is_err());
                h.set(&mut changed, outside(h.domain)).unwrap();
                let message = changed.validate().unwrap_err().to_string();
                let named = format!("{}: argument `{}` is invalid", R::TYPE, h.name);
                assert!(message.starts_with(&named), "{message}");
            }
        }
    }

    #[test]
    fn every_table_describes_its_rule() {
        table_describes::<Sgd>();
        table_describes::<Momentum>();
        table_describes::<Adam>();
        table_describes::<AdamW>();
        table_describes::<Rmsprop>();
        table_describes::<Adagrad>();
    }

    #[test]
    fn the_numbers_are_the_exported_hyperparameters() {
        let adam = Adam {
            amsgrad: true,
            ..Adam::keras()
        };
        assert_eq!(
            <Adam as Rule<f32>>::hyperparameters(&adam),
            [
                ("beta1", 0.9),
                ("beta2", 0.999),
                ("eps", 1e-7),
                ("weight_decay", 0.0)
            ]
        );
        let message = <Adam as Rule<f32>>::validate(&Adam { beta2: 1.0, ..adam })
            .unwrap_err()
            .to_string();
        assert_eq!(
            message,
            "Adam: argument `beta2` is invalid: expected a finite value in [0, 1), got 1"
        );
    }
}
