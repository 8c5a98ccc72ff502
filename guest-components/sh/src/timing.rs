//! `time PIPELINE` (with `TIMEFORMAT`) and the `times` builtin: wall-clock time from the
//! shell's clock, CPU time from the host, which counts it for each process as `getrusage`
//! does (the shell's own, and its waited-for children's).

use std::time::Instant;

use guest_support::process;

/// bash's report when `TIMEFORMAT` is unset.
const BASH_FORMAT: &str = "\nreal\t%3lR\nuser\t%3lU\nsys\t%3lS";
/// `time -p`'s report.
const POSIX_FORMAT: &str = "real %2R\nuser %2U\nsys %2S";

/// A point to time from: the clock and the CPU time of the shell and its children.
pub struct Mark {
    at: Instant,
    user_us: u64,
    system_us: u64,
}

impl Mark {
    pub fn now() -> Mark {
        let ((u, s), (cu, cs)) = process::cpu_times();
        Mark {
            at: Instant::now(),
            user_us: u + cu,
            system_us: s + cs,
        }
    }

    /// The report of what passed since this mark, in `timeformat` (the value of
    /// `TIMEFORMAT`, `None` when unset), or `None` when it asks for no report.
    pub fn report(&self, posix: bool, timeformat: Option<&str>) -> Option<String> {
        let end = Mark::now();
        let real = end.at.duration_since(self.at).as_micros() as u64;
        let user = end.user_us.saturating_sub(self.user_us);
        let sys = end.system_us.saturating_sub(self.system_us);
        let format = if posix {
            POSIX_FORMAT
        } else {
            timeformat.unwrap_or(BASH_FORMAT)
        };
        if format.is_empty() {
            return None;
        }
        let mut out = expand(format, real, user, sys);
        out.push('\n');
        Some(out)
    }
}

/// `TIMEFORMAT`'s expansion: `%[p][l]R`, `U` and `S` (seconds with `p` digits of fraction,
/// 0 to 3, default 3; `l` as `MmS.FFFs`), `%P` (CPU percentage) and `%%`.
fn expand(format: &str, real: u64, user: u64, sys: u64) -> String {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut precision = 3;
        let mut long = false;
        if let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
            precision = d.min(3) as usize;
            chars.next();
        }
        if chars.peek() == Some(&'l') {
            long = true;
            chars.next();
        }
        match chars.next() {
            Some('%') => out.push('%'),
            Some('R') => out.push_str(&seconds(real, precision, long)),
            Some('U') => out.push_str(&seconds(user, precision, long)),
            Some('S') => out.push_str(&seconds(sys, precision, long)),
            Some('P') => {
                let pct = if real == 0 {
                    0.0
                } else {
                    (user + sys) as f64 * 100.0 / real as f64
                };
                out.push_str(&format!("{pct:.2}"));
            }
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// Microseconds as bash prints them: `S.FFF` or, long, `MmS.FFFs`; the fraction is cut,
/// not rounded.
fn seconds(us: u64, precision: usize, long: bool) -> String {
    let (mut secs, micros) = (us / 1_000_000, us % 1_000_000);
    let mut s = String::new();
    if long {
        s.push_str(&format!("{}m", secs / 60));
        secs %= 60;
    }
    s.push_str(&secs.to_string());
    if precision > 0 {
        let frac = micros / 10u64.pow(6 - precision as u32);
        s.push_str(&format!(".{frac:0precision$}"));
    }
    if long {
        s.push('s');
    }
    s
}

/// `times`: the shell's user and system time, then its children's.
pub fn times() -> String {
    let ((u, s), (cu, cs)) = process::cpu_times();
    let f = |us| seconds(us, 3, true);
    format!("{} {}\n{} {}\n", f(u), f(s), f(cu), f(cs))
}

/// `ulimit [-SHa] [-cdfmnpstuv] [VALUE]`: the sandbox's limits, which its operator sets.
/// A limit is reported as it is; setting one to what it already is (or `unlimited` where
/// it is) succeeds, raising one past it fails as for a process without privileges, and
/// lowering one is refused: the host enforces the sandbox's limits, not the shell's.
pub fn ulimit(args: &[String], err: &mut dyn FnMut(&str)) -> (String, i32) {
    let limits = process::limits();
    let kib = |b: u64| Some(b / 1024);
    // (option, description, unit, value; `None` is unlimited)
    let table: [(char, &str, &str, Option<u64>); 9] = [
        ('c', "core file size", "blocks", Some(0)),
        ('d', "data seg size", "kbytes", kib(limits.memory_bytes)),
        ('f', "file size", "blocks", Some(limits.disk_bytes / 512)),
        ('m', "max memory size", "kbytes", kib(limits.memory_bytes)),
        ('n', "open files", "", Some(limits.open_resources)),
        ('p', "pipe size", "512 bytes", Some(limits.pipe_bytes / 512)),
        ('t', "cpu time", "seconds", limits.time_secs),
        (
            'u',
            "max user processes",
            "",
            Some(u64::from(limits.processes)),
        ),
        ('v', "virtual memory", "kbytes", kib(limits.memory_bytes)),
    ];
    let show = |v: Option<u64>| v.map_or("unlimited".to_string(), |n| n.to_string());
    let mut all = false;
    let mut which: Vec<char> = Vec::new();
    let mut value: Option<&str> = None;
    for a in args {
        if let Some(flags) = a.strip_prefix('-').filter(|f| !f.is_empty()) {
            for f in flags.chars() {
                match f {
                    'a' => all = true,
                    'S' | 'H' => {}
                    f if table.iter().any(|t| t.0 == f) => which.push(f),
                    'e' | 'i' | 'l' | 'q' | 'r' | 's' | 'x' | 'R' | 'b' | 'k' | 'P' | 'T' => {
                        err(&format!(
                            "-{f}: the sandbox has no such limit (its limits: -a lists them)"
                        ));
                        return (String::new(), 1);
                    }
                    _ => {
                        err(&format!("-{f}: invalid option"));
                        err("usage: ulimit [-SHacdfmnptuv] [limit]");
                        return (String::new(), 2);
                    }
                }
            }
        } else if value.is_none() {
            value = Some(a);
        } else {
            err(&format!("{a}: too many arguments"));
            return (String::new(), 2);
        }
    }
    // bash's layout: the description in 20 columns, the unit and option right-aligned in
    // 20 more, then the value.
    let line = |(f, name, unit, v): (char, &str, &str, Option<u64>)| {
        let unit = if unit.is_empty() {
            format!("(-{f}) ")
        } else {
            format!("({unit}, -{f}) ")
        };
        format!("{name:<20} {unit:>20}{}\n", show(v))
    };
    if all {
        return (table.iter().map(|t| line(*t)).collect(), 0);
    }
    if which.is_empty() {
        which.push('f');
    }
    let entry = |f: char| *table.iter().find(|t| t.0 == f).unwrap_or(&table[2]);
    let Some(value) = value else {
        let out = which
            .iter()
            .map(|f| {
                let t = entry(*f);
                if which.len() > 1 {
                    line(t)
                } else {
                    format!("{}\n", show(t.3))
                }
            })
            .collect();
        return (out, 0);
    };
    let wanted = match value {
        "unlimited" | "hard" | "soft" => None,
        n => match n.parse::<u64>() {
            Ok(n) => Some(n),
            Err(_) => {
                err(&format!("{n}: invalid number"));
                return (String::new(), 1);
            }
        },
    };
    let mut status = 0;
    for f in which {
        let (_, name, _, current) = entry(f);
        let same = matches!(value, "hard" | "soft") || wanted == current;
        // No core file is ever written, so any core size holds.
        if same || f == 'c' {
            continue;
        }
        let raising = match (wanted, current) {
            (_, None) => false,
            (None, Some(_)) => true,
            (Some(w), Some(c)) => w > c,
        };
        if raising {
            err(&format!(
                "{name}: cannot modify limit: Operation not permitted"
            ));
        } else {
            err(&format!(
                "{name}: cannot modify limit: the sandbox's limits are set by its operator"
            ));
        }
        status = 1;
    }
    (String::new(), status)
}
