//! Variables, arrays, the environment children get, and what the shell says of itself.

use std::collections::BTreeMap;

use crate::io::Io;
use guest_support::process;

use super::*;

impl Shell {
    /// Whether the `shopt` option `name` is on.
    pub fn shopt(&self, name: &str) -> bool {
        self.shopts.contains(name)
    }

    /// bash's variables whose value changes by itself: `RANDOM` (0..32767, a new one at
    /// each use), `SRANDOM` (32 bits), `SECONDS` (since the shell started),
    /// `EPOCHSECONDS`, `EPOCHREALTIME`, `LINENO` (the line the running command starts on,
    /// whatever was assigned to it, as in bash). An assignment makes one an ordinary variable.
    pub(super) fn dynamic_var(&self, name: &str) -> Option<String> {
        if !matches!(
            name,
            "RANDOM"
                | "SRANDOM"
                | "SECONDS"
                | "EPOCHSECONDS"
                | "EPOCHREALTIME"
                | "LINENO"
                | "BASHPID"
                | "PPID"
        ) || (name != "LINENO" && self.vars.contains_key(name))
        {
            return None;
        }
        let now = || {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
        };
        Some(match name {
            "RANDOM" => (self.next_random() % 32768).to_string(),
            "SRANDOM" => (self.next_random() as u32).to_string(),
            "SECONDS" => self.started.elapsed().as_secs().to_string(),
            "EPOCHSECONDS" => now().as_secs().to_string(),
            "LINENO" => self.lineno.to_string(),
            "BASHPID" => self.pid().to_string(),
            "PPID" => {
                let me = self.pid();
                process::processes()
                    .into_iter()
                    .find(|p| p.pid == me)
                    .map_or(0, |p| p.ppid)
                    .to_string()
            }
            _ => {
                let t = now();
                format!("{}.{:06}", t.as_secs(), t.subsec_micros())
            }
        })
    }

    /// This shell's pid in the sandbox (`$$`; asked once).
    pub fn pid(&self) -> u32 {
        if self.pid.get() == 0 {
            self.pid.set(process::self_pid().max(1));
        }
        self.pid.get()
    }

    pub(super) fn next_random(&self) -> u64 {
        let mut x = self.rng.get();
        if x == 0 {
            x = random_seed();
        }
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 16
    }

    /// The variable a name stands for: itself, or what its `-n` reference names (a chain
    /// of at most 8).
    pub fn resolve_ref(&self, name: &str) -> String {
        let mut cur = name;
        for _ in 0..8 {
            match self.vars.get(cur).and_then(|v| v.nameref.as_deref()) {
                Some(next) => cur = next,
                None => break,
            }
        }
        cur.to_string()
    }

    pub fn get_var(&self, name: &str) -> Option<String> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        if let Some(v) = self.dynamic_var(name) {
            return Some(v);
        }
        let v = self.vars.get(name)?;
        match &v.array {
            None => Some(v.value.clone()),
            Some(Array::Indexed(m)) => m.get(&0).cloned(),
            Some(Array::Assoc(m)) => m.get("0").cloned(),
        }
    }

    pub fn set_var(&mut self, name: &str, value: String) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        match self.vars.get_mut(name) {
            Some(Var {
                array: Some(Array::Indexed(m)),
                ..
            }) => {
                m.insert(0, value);
            }
            Some(Var {
                array: Some(Array::Assoc(m)),
                ..
            }) => {
                m.insert("0".into(), value);
            }
            Some(v) => v.value = value,
            None => {
                self.vars.insert(
                    name.to_string(),
                    Var {
                        value,
                        ..Var::default()
                    },
                );
            }
        }
    }

    /// The array `name` (a scalar is a one-element array; unset is `None`).
    pub fn array(&self, name: &str) -> Option<Array> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let v = self.vars.get(name)?;
        Some(match &v.array {
            Some(a) => a.clone(),
            None => Array::Indexed(BTreeMap::from([(0, v.value.clone())])),
        })
    }

    pub fn is_assoc(&self, name: &str) -> bool {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        matches!(
            self.vars.get(name),
            Some(Var {
                array: Some(Array::Assoc(_)),
                ..
            })
        )
    }

    /// Replaces `name` with an array (keeping its export flag).
    pub fn set_array(&mut self, name: &str, array: Array) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let v = self.vars.entry(name.to_string()).or_default();
        v.value.clear();
        v.array = Some(array);
    }

    /// Makes `name` an array if it is not one (a scalar becomes element 0).
    pub(super) fn array_mut(&mut self, name: &str, assoc: bool) -> &mut Array {
        let v = self.vars.entry(name.to_string()).or_default();
        if v.array.is_none() {
            let old = std::mem::take(&mut v.value);
            v.array = Some(if assoc {
                Array::Assoc(BTreeMap::new())
            } else {
                let mut m = BTreeMap::new();
                if !old.is_empty() {
                    m.insert(0, old);
                }
                Array::Indexed(m)
            });
        }
        v.array.as_mut().unwrap()
    }

    /// Sets one element; `key` is already resolved (a number for indexed arrays).
    pub fn set_elem(&mut self, name: &str, key: &str, value: String) {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        let assoc = self.is_assoc(name);
        match self.array_mut(name, assoc) {
            Array::Indexed(m) => {
                m.insert(key.parse().unwrap_or(0), value);
            }
            Array::Assoc(m) => {
                m.insert(key.to_string(), value);
            }
        }
    }

    pub fn get_elem(&self, name: &str, key: &str) -> Option<String> {
        let resolved = self.resolve_ref(name);
        let name = resolved.as_str();
        match &self.vars.get(name)?.array {
            Some(Array::Indexed(m)) => m.get(&key.parse().ok()?).cloned(),
            Some(Array::Assoc(m)) => m.get(key).cloned(),
            None => (key == "0").then(|| self.get_var(name)).flatten(),
        }
    }

    pub fn unset_elem(&mut self, name: &str, key: &str) {
        if let Some(v) = self.vars.get_mut(name) {
            match &mut v.array {
                Some(Array::Indexed(m)) => {
                    if let Ok(k) = key.parse() {
                        m.remove(&k);
                    }
                }
                Some(Array::Assoc(m)) => {
                    m.remove(key);
                }
                None if key == "0" => {
                    self.vars.remove(name);
                }
                None => {}
            }
        }
    }

    pub fn export(&mut self, name: &str) {
        self.vars.entry(name.to_string()).or_default().exported = true;
    }

    pub fn unset_var(&mut self, name: &str) {
        self.vars.remove(name);
    }

    /// Declares `name` local to the running function.
    pub fn make_local(&mut self, name: &str) {
        if let Some(frame) = self.locals.last_mut()
            && !frame.iter().any(|(n, _)| n == name)
        {
            frame.push((name.to_string(), self.vars.get(name).cloned()));
        }
    }

    /// The environment of a child: exported variables, then `extra`, and `PWD`.
    pub(super) fn child_env(&self, extra: &[(String, String)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = self
            .vars
            .iter()
            .filter(|(k, v)| v.exported && k.as_str() != "PWD")
            .map(|(k, v)| (k.clone(), v.value.clone()))
            .collect();
        for (k, v) in extra {
            env.retain(|(key, _)| key != k);
            env.push((k.clone(), v.clone()));
        }
        env.push(("PWD".to_string(), self.cwd.clone()));
        env
    }

    /// An absolute sandbox path for `p`.
    pub fn abs_path(&self, p: &str) -> String {
        if p.starts_with('/') {
            p.to_string()
        } else if self.cwd.ends_with('/') {
            format!("{}{p}", self.cwd)
        } else {
            format!("{}/{p}", self.cwd)
        }
    }

    pub fn error(&self, io: &Io, msg: &str) {
        let line = match &self.script {
            // bash names a script and the line: `s.sh: line 2: cd: /x: No such file ...`.
            Some(script) if self.lineno > 0 => format!("{script}: line {}: {msg}\n", self.lineno),
            Some(script) => format!("{script}: {msg}\n"),
            None => format!("{}: {msg}\n", self.name()),
        };
        io.stderr.write_str(&line);
    }

    pub fn name(&self) -> &str {
        match self.arg0.rsplit('/').next() {
            Some("bash") => "bash",
            _ => "sh",
        }
    }
}

/// A seed for `$RANDOM` from the host's randomness (std's hash keys come from it).
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos(),
    );
    h.finish() | 1
}
