//! A canary's routing for the router plugins' unit tests (each includes this file with
//! `#[path]`): `n` servers on loopback, blue at 127.0.0.1:18081, :18083, … holding 1.0 and
//! stable, green at :18082, :18084, … holding 2.0.

use manent::plugin::{Pool, Routing};

pub fn routing(n: usize, weight: u32, scale: u32) -> Routing {
    let addrs = |base: u16| {
        (0..n)
            .map(|i| format!("127.0.0.1:{}", base + 2 * u16::try_from(i).unwrap_or(0)))
            .collect()
    };
    Routing {
        stable: Pool {
            slot: "blue".into(),
            version: "1.0".into(),
            addresses: addrs(18081),
        },
        candidate: Pool {
            slot: "green".into(),
            version: "2.0".into(),
            addresses: addrs(18082),
        },
        weight,
        testers: false,
        scale,
        retired: false,
    }
}
