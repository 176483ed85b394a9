//! The runtime a benchmark runs on: multi-threaded like manent's binary, or
//! `MANENT_BENCH_RT=current` for a single-threaded one (to measure what cross-thread wake-ups
//! cost).

pub fn runtime() -> tokio::runtime::Runtime {
    let mut b = if std::env::var("MANENT_BENCH_RT").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    b.enable_all().build().unwrap()
}
