//! The job and directory builtins of a shell without job control, as bash behaves when it
//! runs a script: `jobs`, `disown`, `fg`/`bg`, and the directory stack (`pushd`, `popd`,
//! `dirs`).

use guest_support::process;

use crate::io::Io;
use crate::shell::{Array, Shell};

/// `jobs [-lprsn] [JOBSPEC...]`: the background jobs still running. As in a bash script,
/// jobs that have ended are not listed (their status stays for `wait`).
pub fn jobs(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (mut pids_only, mut long) = (false, false);
    let mut specs = Vec::new();
    for a in args {
        match a.strip_prefix('-').filter(|f| !f.is_empty()) {
            Some(flags) => {
                for f in flags.chars() {
                    match f {
                        'p' => pids_only = true,
                        'l' => long = true,
                        'r' | 's' | 'n' => {}
                        _ => {
                            sh.error(io, &format!("jobs: -{f}: invalid option"));
                            return 2;
                        }
                    }
                }
            }
            None => specs.push(a.clone()),
        }
    }
    // Job N is the Nth still in the table; `+` marks the last, `-` the one before.
    let running: Vec<(usize, u32)> = sh
        .background
        .iter()
        .enumerate()
        .filter(|(_, pid)| process::ended(**pid).is_none())
        .map(|(i, pid)| (i + 1, *pid))
        .collect();
    let mut chosen = Vec::new();
    let mut status = 0;
    if specs.is_empty() {
        chosen.clone_from(&running);
    }
    for spec in &specs {
        let found = crate::builtins::job_pid(sh, spec)
            .and_then(|pid| running.iter().find(|(_, p)| *p == pid).copied());
        match found {
            Some(job) => chosen.push(job),
            None => {
                sh.error(io, &format!("jobs: {spec}: no such job"));
                status = 1;
            }
        }
    }
    let last = running.last().map(|j| j.0);
    let previous = running.iter().rev().nth(1).map(|j| j.0);
    let mut out = String::new();
    for (n, pid) in chosen {
        if pids_only {
            out.push_str(&format!("{pid}\n"));
            continue;
        }
        let mark = if Some(n) == last {
            '+'
        } else if Some(n) == previous {
            '-'
        } else {
            ' '
        };
        let text = sh.job_text.get(&pid).cloned().unwrap_or_default();
        if long {
            out.push_str(&format!("[{n}]{mark} {pid} {:<24}{text}\n", "Running"));
        } else {
            out.push_str(&format!("[{n}]{mark}  {:<24}{text}\n", "Running"));
        }
    }
    io.stdout.write_str(&out);
    status
}

/// `disown [-ahr] [JOBSPEC...]`: forgets jobs (`wait` no longer waits for them; they run
/// on until they end or the job of the shell ends). `-h` keeps them: no hangup is ever
/// sent to them here.
pub fn disown(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (mut all, mut keep, mut running_only) = (false, false, false);
    let mut specs = Vec::new();
    for a in args {
        match a.strip_prefix('-').filter(|f| !f.is_empty()) {
            Some(flags) => {
                for f in flags.chars() {
                    match f {
                        'a' => all = true,
                        'h' => keep = true,
                        'r' => running_only = true,
                        _ => {
                            sh.error(io, &format!("disown: -{f}: invalid option"));
                            return 2;
                        }
                    }
                }
            }
            None => specs.push(a.clone()),
        }
    }
    let mut pids = Vec::new();
    let mut status = 0;
    if all {
        pids = sh.background.clone();
    } else if specs.is_empty() {
        match sh.background.last() {
            Some(pid) => pids.push(*pid),
            None => {
                sh.error(io, "disown: current: no such job");
                return 1;
            }
        }
    }
    for spec in &specs {
        match crate::builtins::job_pid(sh, spec).filter(|p| sh.background.contains(p)) {
            Some(pid) => pids.push(pid),
            None => {
                sh.error(io, &format!("disown: {spec}: no such job"));
                status = 1;
            }
        }
    }
    if running_only {
        pids.retain(|p| process::ended(*p).is_none());
    }
    if !keep {
        sh.background.retain(|p| !pids.contains(p));
        for p in &pids {
            sh.job_text.remove(p);
        }
    }
    status
}

/// `fg` and `bg`: a shell running a script has no job control, and says so as bash does.
pub fn no_job_control(sh: &Shell, name: &str, io: &Io) -> i32 {
    sh.error(io, &format!("{name}: no job control"));
    1
}

/// The directory stack as `dirs` shows it: the working directory, then the saved ones.
fn stack(sh: &Shell) -> Vec<String> {
    let mut all = vec![sh.cwd.clone()];
    all.extend(sh.dir_stack.iter().cloned());
    all
}

/// A directory with `$HOME` written `~`, as `dirs` prints it without `-l`.
fn polite(sh: &Shell, dir: &str) -> String {
    match sh.get_var("HOME").filter(|h| h.len() > 1) {
        Some(home) if dir == home => "~".to_string(),
        Some(home) if dir.starts_with(&format!("{home}/")) => format!("~{}", &dir[home.len()..]),
        _ => dir.to_string(),
    }
}

/// Keeps `DIRSTACK` equal to the stack.
fn publish(sh: &mut Shell) {
    let all = stack(sh);
    let m = all
        .into_iter()
        .enumerate()
        .map(|(i, d)| (i as i64, d))
        .collect();
    sh.set_array("DIRSTACK", Array::Indexed(m));
}

/// `+N` (from the left, 0 the top) or `-N` (from the right) as an index into a stack of
/// `len`, if it is one.
fn stack_index(arg: &str, len: usize) -> Option<Result<usize, ()>> {
    let (from_left, n) = match (arg.strip_prefix('+'), arg.strip_prefix('-')) {
        (Some(n), _) => (true, n),
        (_, Some(n)) => (false, n),
        _ => return None,
    };
    let n: usize = n.parse().ok()?;
    Some(if n >= len {
        Err(())
    } else if from_left {
        Ok(n)
    } else {
        Ok(len - 1 - n)
    })
}

/// `dirs [-clpv] [+N|-N]`.
pub fn dirs(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (mut long, mut lines, mut numbered) = (false, false, false);
    let mut pick = None;
    let all = stack(sh);
    for a in args {
        if let Some(i) = stack_index(a, all.len()) {
            match i {
                Ok(i) => pick = Some(i),
                Err(()) => {
                    sh.error(
                        io,
                        &format!("dirs: {a}: directory stack index out of range"),
                    );
                    return 1;
                }
            }
            continue;
        }
        match a.strip_prefix('-').filter(|f| !f.is_empty()) {
            Some(flags) if flags.chars().all(|c| "clpv".contains(c)) => {
                for f in flags.chars() {
                    match f {
                        'c' => {
                            sh.dir_stack.clear();
                            publish(sh);
                            return 0;
                        }
                        'l' => long = true,
                        'p' => lines = true,
                        _ => numbered = true,
                    }
                }
            }
            _ => {
                sh.error(io, &format!("dirs: {a}: invalid option"));
                return 2;
            }
        }
    }
    let show = |d: &String| if long { d.clone() } else { polite(sh, d) };
    let out = match pick {
        Some(i) => format!("{}\n", show(&all[i])),
        None if numbered => all
            .iter()
            .enumerate()
            .map(|(i, d)| format!("{i:2}  {}\n", show(d)))
            .collect(),
        None if lines => all.iter().map(|d| format!("{}\n", show(d))).collect(),
        None => format!("{}\n", all.iter().map(show).collect::<Vec<_>>().join(" ")),
    };
    io.stdout.write_str(&out);
    0
}

/// Prints the stack after a change, as `pushd` and `popd` do.
fn print_stack(sh: &mut Shell, io: &Io) {
    publish(sh);
    let all = stack(sh);
    let shown: Vec<String> = all.iter().map(|d| polite(sh, d)).collect();
    io.stdout.write_str(&format!("{}\n", shown.join(" ")));
}

/// The arguments of `pushd` and `popd` (`name`): `-n`, and at most one other.
fn stack_args(
    sh: &Shell,
    name: &str,
    args: &[String],
    io: &Io,
) -> Result<(bool, Option<String>), i32> {
    let mut no_cd = false;
    let mut operand = None;
    for a in args {
        if a == "-n" {
            no_cd = true;
        } else if operand.is_none() {
            operand = Some(a.clone());
        } else {
            sh.error(io, &format!("{name}: too many arguments"));
            return Err(2);
        }
    }
    Ok((no_cd, operand))
}

/// Moves `pushd` or `popd` (`name`) to `dir`, saying why not as `cd` would.
fn enter(sh: &mut Shell, name: &str, dir: &str, io: &Io) -> bool {
    match crate::builtins::change_dir(sh, dir) {
        Ok(()) => true,
        Err(why) => {
            sh.error(io, &format!("{name}: {why}"));
            false
        }
    }
}

/// `pushd [-n] [DIR | +N | -N]`.
pub fn pushd(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (no_cd, target) = match stack_args(sh, "pushd", args, io) {
        Ok(parsed) => parsed,
        Err(status) => return status,
    };
    let all = stack(sh);
    let Some(target) = target else {
        // Swap the top two.
        if sh.dir_stack.is_empty() {
            sh.error(io, "pushd: no other directory");
            return 1;
        }
        let top = sh.dir_stack[0].clone();
        if !no_cd && !enter(sh, "pushd", &top, io) {
            return 1;
        }
        sh.dir_stack[0] = all[0].clone();
        print_stack(sh, io);
        return 0;
    };
    if let Some(i) = stack_index(&target, all.len()) {
        let Ok(i) = i else {
            sh.error(
                io,
                &format!("pushd: {target}: directory stack index out of range"),
            );
            return 1;
        };
        // Rotate so that entry `i` is on top.
        let mut rotated = all[i..].to_vec();
        rotated.extend_from_slice(&all[..i]);
        if !no_cd && i != 0 && !enter(sh, "pushd", &rotated[0], io) {
            return 1;
        }
        sh.dir_stack = rotated[1..].to_vec();
        print_stack(sh, io);
        return 0;
    }
    if no_cd {
        let abs = crate::builtins::normalize(&sh.abs_path(&target));
        sh.dir_stack.insert(0, abs);
    } else {
        let old = sh.cwd.clone();
        if !enter(sh, "pushd", &target, io) {
            return 1;
        }
        sh.dir_stack.insert(0, old);
    }
    print_stack(sh, io);
    0
}

/// `popd [-n] [+N | -N]`.
pub fn popd(sh: &mut Shell, args: &[String], io: &Io) -> i32 {
    let (no_cd, which) = match stack_args(sh, "popd", args, io) {
        Ok(parsed) => parsed,
        Err(status) => return status,
    };
    if sh.dir_stack.is_empty() {
        sh.error(io, "popd: directory stack empty");
        return 1;
    }
    let len = sh.dir_stack.len() + 1;
    let index = match which {
        None => 0,
        Some(w) => match stack_index(&w, len) {
            Some(Ok(i)) => i,
            Some(Err(())) => {
                sh.error(
                    io,
                    &format!("popd: {w}: directory stack index out of range"),
                );
                return 1;
            }
            None => {
                sh.error(io, &format!("popd: {w}: invalid argument"));
                return 2;
            }
        },
    };
    if index == 0 {
        let next = sh.dir_stack[0].clone();
        if !no_cd && !enter(sh, "popd", &next, io) {
            return 1;
        }
        sh.dir_stack.remove(0);
    } else {
        sh.dir_stack.remove(index - 1);
    }
    print_stack(sh, io);
    0
}
