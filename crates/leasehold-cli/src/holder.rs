//! The holder label: who holds a lease, as `show` prints it.

/// `<host>:pid-<pid>`, with the host name cut to the characters and length a holder id
/// allows; each grant's holder id is this label, `#` and a unique suffix.
pub(crate) fn label() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_default();
    let host: String = host
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .take(64)
        .collect();
    let pid = std::process::id();
    if host.is_empty() {
        format!("pid-{pid}")
    } else {
        format!("{host}:pid-{pid}")
    }
}
