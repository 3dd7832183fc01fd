//! The cores other processes kept busy while a child process ran, measured as the peers'
//! `common.py` does: the machine's busy time from `/proc/stat` minus the child's own CPU
//! time (here: the `cutime + cstime` of this process in `/proc/self/stat`, which grows by
//! the CPU time of each child it waits for), over the wall time of the run. Both files
//! count in the same clock ticks, so no tick rate is needed:
//! `other = (busy ticks - child ticks) / all ticks * CPUs`.

use std::fs;

/// Counters read before and after a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Snapshot {
    /// Ticks the CPUs spent busy (all but idle and iowait), summed over CPUs.
    busy: u64,
    /// All ticks, summed over CPUs.
    total: u64,
    /// The CPU ticks of the children this process waited for.
    children: u64,
    cpus: usize,
}

impl Snapshot {
    /// The counters now, or `None` without a readable `/proc`.
    pub fn now() -> Option<Self> {
        let stat = fs::read_to_string("/proc/stat").ok()?;
        let own = fs::read_to_string("/proc/self/stat").ok()?;
        Self::parse(&stat, &own)
    }

    fn parse(proc_stat: &str, self_stat: &str) -> Option<Self> {
        let first = proc_stat.lines().next()?;
        let fields: Vec<u64> = first
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        let [user, nice, system, idle, iowait, irq, softirq, steal] = fields[..] else {
            return None;
        };
        let total = user + nice + system + idle + iowait + irq + softirq + steal;
        let cpus = proc_stat
            .lines()
            .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
            .count();
        // Fields after the command name (which may hold spaces): state is field 3 of
        // proc(5), cutime and cstime fields 16 and 17.
        let after_name = &self_stat[self_stat.rfind(')')? + 1..];
        let rest: Vec<&str> = after_name.split_whitespace().collect();
        let tick = |field: usize| rest.get(field - 3)?.parse::<u64>().ok();
        Some(Self {
            busy: total - idle - iowait,
            total,
            children: tick(16)? + tick(17)?,
            cpus: cpus.max(1),
        })
    }

    /// The cores other processes kept busy between `self` and `later`, on average.
    pub fn other_cores(&self, later: &Snapshot) -> f64 {
        let all = later.total.saturating_sub(self.total).max(1) as f64;
        let busy = later.busy.saturating_sub(self.busy) as f64;
        let own = later.children.saturating_sub(self.children) as f64;
        ((busy - own) / all * self.cpus as f64).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SELF_STAT: &str = "4242 (xtask (main)) S 1 4242 4242 0 -1 4194304 500 9000 0 0 \
                             12 3 250 40 20 0 1 0 100 2000000 300 18446744073709551615";

    fn proc_stat(user: u64, idle: u64) -> String {
        format!(
            "cpu  {user} 0 0 {idle} 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n\
             cpu1 1 0 0 1 0 0 0 0 0 0\nintr 1 2 3\n"
        )
    }

    #[test]
    fn parses_the_machine_counters_and_the_waited_for_children() {
        let snap = Snapshot::parse(&proc_stat(100, 300), SELF_STAT).unwrap();
        assert_eq!(
            snap,
            Snapshot {
                busy: 100,
                total: 400,
                children: 290,
                cpus: 2,
            }
        );
        assert_eq!(Snapshot::parse("intr 1 2\n", SELF_STAT), None);
    }

    #[test]
    fn other_cores_are_the_busy_time_the_child_did_not_use() {
        let before = Snapshot::parse(&proc_stat(0, 0), SELF_STAT).unwrap();
        // 200 ticks of wall time on 2 CPUs: 300 busy, 200 of them the child's.
        let after = Snapshot {
            busy: 300,
            total: 400,
            children: before.children + 200,
            cpus: 2,
        };
        assert_eq!(before.other_cores(&after), 0.5);
        let idle_child = Snapshot {
            children: before.children + 300,
            ..after
        };
        assert_eq!(before.other_cores(&idle_child), 0.0);
    }
}
