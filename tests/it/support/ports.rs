//! Loopback ports for the servers tests start.

/// A loopback port for a server started later, most often by another process (nginx, HAProxy,
/// sshd, PostgreSQL, Prometheus, a plugin's state listener). Taken below the kernel's ephemeral
/// range, where neither another test's `bind(…:0)` nor a client's `connect` can take it in the
/// meantime. A port bound and released there can go to another test, or to a client's
/// connection, before nginx binds it, and nginx then refuses its reload on "Address already
/// in use" (what most likely failed a canary test in CI). Each port is handed out once a run;
/// one something holds already is passed over.
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let ephemeral: u32 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse().ok())
        .unwrap_or(32768);
    let low = 10_000.min(ephemeral / 2);
    let span = ephemeral - low;
    // Runs one after another start apart: a server an earlier run left behind is not met.
    let start = std::process::id().wrapping_mul(7919) % span;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        assert!(n < span, "no loopback port left below {ephemeral}");
        let port = u16::try_from(low + (start + n) % span).unwrap();
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}
