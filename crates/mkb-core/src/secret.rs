//! The secrets this process holds (API keys read from the environment variables the config
//! names) and the scrubber that every writer of an artifact runs its text through: the store,
//! trajectories, recordings, kernel snapshots, skills and logs. Whatever produced the text (a
//! provider echoing request headers, a candidate printing the parent's environment), the exact
//! secret values never reach disk or a later request.

use std::borrow::Cow;
use std::sync::RwLock;

/// What replaces a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Shorter values are not treated as secrets (scrubbing them would mangle ordinary text).
pub const MIN_SECRET_LEN: usize = 8;

static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Remember `value` as a secret of this process (idempotent). Values shorter than
/// [`MIN_SECRET_LEN`] bytes are ignored.
pub fn register(value: &str) {
    let v = value.trim();
    if v.len() < MIN_SECRET_LEN {
        return;
    }
    let mut s = SECRETS.write().unwrap_or_else(|e| e.into_inner());
    if !s.iter().any(|x| x == v) {
        s.push(v.to_string());
        // Longest first, so a secret that contains another is replaced whole.
        s.sort_by_key(|x| std::cmp::Reverse(x.len()));
    }
}

/// How many secrets are registered.
pub fn count() -> usize {
    SECRETS.read().map(|s| s.len()).unwrap_or(0)
}

/// `text` with every registered secret replaced by [`REDACTED`].
pub fn scrub(text: &str) -> Cow<'_, str> {
    let s = SECRETS.read().unwrap_or_else(|e| e.into_inner());
    if !s.iter().any(|k| text.contains(k.as_str())) {
        return Cow::Borrowed(text);
    }
    let mut out = text.to_string();
    for k in s.iter() {
        if out.contains(k.as_str()) {
            out = out.replace(k.as_str(), REDACTED);
        }
    }
    Cow::Owned(out)
}

/// `bytes` scrubbed when they are UTF-8 (secrets are text); other bytes are left as they are.
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    match std::str::from_utf8(bytes) {
        Ok(t) => match scrub(t) {
            Cow::Borrowed(_) => Cow::Borrowed(bytes),
            Cow::Owned(s) => Cow::Owned(s.into_bytes()),
        },
        Err(_) => Cow::Borrowed(bytes),
    }
}

/// Scrub every string (keys included) of a JSON value in place.
pub fn scrub_json(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) => {
            if let Cow::Owned(o) = scrub(s) {
                *s = o;
            }
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(scrub_json),
        serde_json::Value::Object(m) => {
            let keys: Vec<String> = m.keys().cloned().collect();
            for k in keys {
                let mut val = m.remove(&k).unwrap_or(serde_json::Value::Null);
                scrub_json(&mut val);
                m.insert(scrub(&k).into_owned(), val);
            }
        }
        _ => {}
    }
}

/// Scrub a serializable value by a JSON round trip (unchanged when it holds no secret or
/// does not round-trip).
pub fn scrub_value<T>(value: &T) -> Option<T>
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut v = serde_json::to_value(value).ok()?;
    scrub_json(&mut v);
    serde_json::from_value(v).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_secrets_are_scrubbed_everywhere() {
        let key = "sk-secret-test-7d1e0c9a44b2";
        assert_eq!(
            scrub(&format!("a {key} b")),
            format!("a {key} b"),
            "not yet a secret"
        );
        register(key);
        register(key);
        register("short");
        assert_eq!(
            scrub(&format!("a {key} b {key}")),
            "a [REDACTED] b [REDACTED]"
        );
        assert_eq!(scrub("short stays"), "short stays");
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        let mut v = serde_json::json!({"x": [format!("Bearer {key}"), 3], key: {"y": key}});
        scrub_json(&mut v);
        let text = v.to_string();
        assert!(!text.contains(key), "{text}");
        assert_eq!(v["x"][0], "Bearer [REDACTED]");
        assert_eq!(v["[REDACTED]"]["y"], "[REDACTED]");
        assert_eq!(
            scrub_bytes(format!("k={key}").as_bytes()).as_ref(),
            b"k=[REDACTED]"
        );
        assert_eq!(scrub_bytes(&[0xff, 0xfe]).as_ref(), &[0xff, 0xfe]);
    }

    #[test]
    fn longer_secret_wins_over_its_prefix() {
        register("prefix-secret-abc");
        register("prefix-secret-abc-and-more");
        assert_eq!(scrub("x prefix-secret-abc-and-more y"), "x [REDACTED] y");
    }
}
