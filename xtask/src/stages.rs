//! The named steps of a long verb (`cargo xtask test`), each timed, with a table of the
//! times at the end (also when a step fails), so that a slow CI run shows where it went.

use std::time::Instant;

/// The steps run so far and their seconds.
#[derive(Default)]
pub struct Stages {
    done: Vec<(&'static str, f64, bool)>,
}

impl Stages {
    /// Runs `step` as the stage `name`, timing it; its error is returned after the table
    /// of every stage so far is printed.
    pub fn run(
        &mut self,
        name: &'static str,
        step: impl FnOnce() -> Result<(), String>,
    ) -> Result<(), String> {
        eprintln!("xtask: stage `{name}`");
        let started = Instant::now();
        let outcome = step();
        let seconds = started.elapsed().as_secs_f64();
        self.done.push((name, seconds, outcome.is_ok()));
        eprintln!("xtask: stage `{name}` took {seconds:.1} s");
        if outcome.is_err() {
            eprint!("{}", self.table());
        }
        outcome
    }

    /// `stage  seconds` lines for every stage run, and their total.
    pub fn table(&self) -> String {
        let width = self.done.iter().map(|(n, ..)| n.len()).max().unwrap_or(0);
        let mut table = String::from("xtask: stage times\n");
        for (name, seconds, ok) in &self.done {
            let failed = if *ok { "" } else { "  (failed)" };
            table.push_str(&format!("  {name:<width$}  {seconds:>7.1} s{failed}\n"));
        }
        let total: f64 = self.done.iter().map(|(_, s, _)| s).sum();
        table.push_str(&format!("  {:<width$}  {total:>7.1} s\n", "total"));
        table
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_stage_is_listed_with_its_outcome_and_the_total() {
        let mut stages = Stages::default();
        assert!(stages.run("first", || Ok(())).is_ok());
        assert_eq!(
            stages.run("second", || Err("broke".to_owned())),
            Err("broke".to_owned())
        );
        let table = stages.table();
        assert!(table.contains("  first "), "{table}");
        assert!(table.contains("s  (failed)\n"), "{table}");
        assert!(
            table
                .lines()
                .last()
                .unwrap()
                .trim_start()
                .starts_with("total"),
            "{table}"
        );
    }
}
