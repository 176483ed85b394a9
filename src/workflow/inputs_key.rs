//! Stored workflow inputs are authenticated: each row carries an HMAC-SHA256 of its id, kind and
//! inputs under a key the database does not hold — a file beside a SQLite database (0600), a
//! secret the engines share for PostgreSQL. Whoever can write the database but not read the key
//! (a swapped file, an edited row) cannot make an engine run a command: a row whose inputs do
//! not verify is refused at its claim and never runs. The database keeps the key's fingerprint,
//! so an engine given another key refuses to open it rather than refuse every deployment.

use std::path::{Path, PathBuf};

use sha2::Sha256;

use crate::sys::files::{Refused, Trust};

/// How stored MACs are marked (a plain digest from before keys has no prefix).
const PREFIX: &str = "hmac-sha256:";

/// Shortest shared secret accepted as a key.
pub const MIN_SECRET: usize = 32;

/// The key that authenticates stored inputs.
#[derive(Clone)]
pub struct InputsKey {
    key: Vec<u8>,
    source: String,
}

impl std::fmt::Debug for InputsKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InputsKey")
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

/// HMAC-SHA256 of `parts`, each length-prefixed so no two inputs run together.
fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    use hmac::Mac;
    // HMAC takes a key of any length: `new_from_slice` cannot fail for it.
    let Ok(mut mac) = hmac::Hmac::<Sha256>::new_from_slice(key) else {
        return [0; 32];
    };
    for p in parts {
        mac.update(&(p.len() as u64).to_be_bytes());
        mac.update(p);
    }
    mac.finalize().into_bytes().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Equal strings, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// What an opening store finds of the key in the database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyVerdict {
    /// No key has signed this database yet (a new one, or one from before keys): this key
    /// signs it from now on. Rows written before (a plain digest anyone can compute) are not
    /// vouched for: a deployment an older manent left unfinished is refused, not resumed.
    Adopt,
    /// The database was signed with this key.
    Matches,
    /// It was signed with another key: refused at open, since no deployment could run.
    Differs,
}

impl InputsKey {
    /// A key from a secret's value (PostgreSQL's `engine.inputs_key`): at least
    /// [`MIN_SECRET`] characters.
    pub fn from_secret(value: &str, source: &str) -> Result<InputsKey, String> {
        if value.chars().count() < MIN_SECRET {
            return Err(format!(
                "{source} is {} characters: an inputs key needs at least {MIN_SECRET} (generate \
                 one with `head -c 32 /dev/urandom | base64`)",
                value.chars().count()
            ));
        }
        Ok(InputsKey {
            key: value.as_bytes().to_vec(),
            source: source.to_owned(),
        })
    }

    /// Where it came from, as errors name it.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The key file beside database `db`.
    pub fn path_beside(db: &Path) -> PathBuf {
        let mut p = db.as_os_str().to_owned();
        p.push(".key");
        PathBuf::from(p)
    }

    /// Reads the key file at `path`, which must pass `trust`'s checks; None when it is missing.
    pub fn load(path: &Path, trust: &Trust) -> Result<Option<InputsKey>, Refused> {
        let what = "the inputs key";
        if !trust.check_file(path, what)? {
            return Ok(None);
        }
        let bad = |problem: String| Refused {
            what: what.into(),
            path: path.to_owned(),
            problem,
            fix: "restore it from where you keep the database's backups".into(),
        };
        let text =
            std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read it: {e}")))?;
        let text = text.trim();
        let key: Option<Vec<u8>> = (text.len() == 64)
            .then(|| {
                (0..32)
                    .map(|i| u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok())
                    .collect()
            })
            .flatten();
        let key = key.ok_or_else(|| bad("it is not 64 hex digits".into()))?;
        Ok(Some(InputsKey {
            key,
            source: path.display().to_string(),
        }))
    }

    /// Makes a new random key file at `path` (mode from `trust`).
    pub fn create(path: &Path, trust: &Trust) -> Result<InputsKey, Refused> {
        let what = "the inputs key";
        let mut key = vec![0u8; 32];
        let mut urandom = std::fs::File::open("/dev/urandom").map_err(|e| Refused {
            what: what.into(),
            path: path.to_owned(),
            problem: format!("cannot read /dev/urandom: {e}"),
            fix: "manent needs the system's random numbers".into(),
        })?;
        std::io::Read::read_exact(&mut urandom, &mut key).map_err(|e| Refused {
            what: what.into(),
            path: path.to_owned(),
            problem: format!("cannot read /dev/urandom: {e}"),
            fix: "manent needs the system's random numbers".into(),
        })?;
        let mut file = trust.create_file(path, what)?;
        let written = std::io::Write::write_all(&mut file, format!("{}\n", hex(&key)).as_bytes())
            .and_then(|()| file.sync_all());
        if let Err(e) = written {
            let _ = std::fs::remove_file(path);
            return Err(Refused {
                what: what.into(),
                path: path.to_owned(),
                problem: format!("cannot write it: {e}"),
                fix: "free space on its disk".into(),
            });
        }
        Ok(InputsKey {
            key,
            source: path.display().to_string(),
        })
    }

    /// The MAC stored beside workflow `id`'s inputs.
    pub fn mac(&self, id: &str, name: &str, inputs: &str) -> String {
        let tag = hmac(
            &self.key,
            &[
                b"manent workflow inputs v1",
                id.as_bytes(),
                name.as_bytes(),
                inputs.as_bytes(),
            ],
        );
        format!("{PREFIX}{}", hex(&tag))
    }

    /// True when `stored` is this key's MAC of the row.
    pub fn verifies(&self, id: &str, name: &str, inputs: &str, stored: &str) -> bool {
        same(&self.mac(id, name, inputs), stored)
    }

    /// What the database keeps to recognise this key (it tells nothing of the key).
    pub fn fingerprint(&self) -> String {
        hex(&hmac(&self.key, &[b"manent inputs key fingerprint v1"]))
    }

    /// What the database's stored fingerprint says of this key.
    pub fn verdict(&self, stored: Option<&str>) -> KeyVerdict {
        match stored {
            None => KeyVerdict::Adopt,
            Some(f) if same(f, &self.fingerprint()) => KeyVerdict::Matches,
            Some(_) => KeyVerdict::Differs,
        }
    }

    /// Why a database signed with another key is refused.
    pub fn differs(&self, db: &str) -> String {
        format!(
            "its deployments were signed with another inputs key than {}: an engine with the \
             wrong key would refuse every one of them. Give the key this database was created \
             with{}",
            self.source,
            if self.source.contains('/') {
                " (restore the file from the database's backups)"
            } else {
                " (the same `engine.inputs_key` secret as the other engines on it)"
            }
        ) + &format!("; to start afresh, use another database than {db}")
    }

    /// The error a row whose inputs do not verify is ended with.
    pub fn refusal(&self, id: &str) -> String {
        format!(
            "refused: the stored inputs of {id} do not verify with the inputs key ({}): they were \
             written or changed outside manent, so it was never run. Find out who could write \
             the database; start the deployment again to run it",
            self.source
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mac_is_hmac_sha256_of_the_length_prefixed_parts() {
        // Computed independently (Python's hmac module): a change here would make every
        // stored deployment unverifiable.
        let k = InputsKey::from_secret(&"k".repeat(32), "test").unwrap();
        assert_eq!(
            k.mac("dep-1", "deploy", "{}"),
            "hmac-sha256:97e9f77398e52027d43fe4a6c87463408789a74a9d5bba0bce512e39a42bdf39"
        );
    }

    #[test]
    fn a_mac_binds_the_id_the_kind_and_the_inputs() {
        let k = InputsKey::from_secret(&"k".repeat(32), "test").unwrap();
        let m = k.mac("dep-1", "deploy", "{}");
        assert!(k.verifies("dep-1", "deploy", "{}", &m));
        assert!(!k.verifies("dep-2", "deploy", "{}", &m));
        assert!(!k.verifies("dep-1", "rollback", "{}", &m));
        assert!(!k.verifies("dep-1", "deploy", "{ }", &m));
        let other = InputsKey::from_secret(&"j".repeat(32), "test").unwrap();
        assert!(!other.verifies("dep-1", "deploy", "{}", &m));
        // A plain digest (what an attacker can compute) never verifies.
        assert!(!k.verifies(
            "dep-1",
            "deploy",
            "{}",
            &super::super::store::inputs_digest("{}")
        ));
    }

    #[test]
    fn a_database_knows_its_key_by_fingerprint() {
        let k = InputsKey::from_secret(&"k".repeat(32), "test").unwrap();
        assert_eq!(k.verdict(None), KeyVerdict::Adopt);
        assert_eq!(k.verdict(Some(&k.fingerprint())), KeyVerdict::Matches);
        assert_eq!(k.verdict(Some("00")), KeyVerdict::Differs);
        assert!(InputsKey::from_secret("short", "engine.inputs_key").is_err());
    }

    #[test]
    fn a_key_file_is_private_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db.key");
        let trust = Trust::private();
        let made = InputsKey::create(&path, &trust).unwrap();
        let read = InputsKey::load(&path, &trust).unwrap().unwrap();
        assert_eq!(made.fingerprint(), read.fingerprint());
        use std::os::unix::fs::MetadataExt;
        assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o777, 0o600);
        assert!(
            InputsKey::load(&dir.path().join("none"), &trust)
                .unwrap()
                .is_none()
        );
    }
}
