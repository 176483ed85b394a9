//! The simulated canary: two slots per target, a router whose weights, tester routing and
//! candidate scale live in memory, and the traffic it reports (requests, errors and latency per
//! slot, as the descriptor's `simulate:` settings draw them).

use super::*;

#[async_trait]
impl SlotDeployer for Simulate {
    async fn prepare_slots(&self, req: &Request) -> Result<serde_json::Value, PluginError> {
        // The slot manent records as stable (else the one the fleet serves) keeps production;
        // the other takes the candidate.
        let live = req
            .routing
            .as_ref()
            .map(|r| r.stable.slot.clone())
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| self.live_slot(req));
        let candidate = if live == "blue" { "green" } else { "blue" };
        self.route(req, |r| {
            r.stable.slot.clone_from(&live);
            r.candidate.slot = candidate.to_owned();
            r.weight = 0;
            r.testers = false;
            r.scale = 100;
            r.retired = false;
        });
        self.ledger(req, "slots", candidate);
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "simulated slots: stable {live}, candidate {candidate} (nothing real is touched)"
        ));
        Ok(serde_json::json!({"simulated": true, "stable": live, "candidate": candidate}))
    }

    async fn deploy_candidate(&self, req: &Request) -> Result<DeployResult, PluginError> {
        let (_, candidate) = Simulate::slots(req);
        let candidate = &candidate;
        let outcome = for_each_target(req, |t| async move {
            let took = self.work(req, &t, "candidate deploy").await?;
            self.ledger(req, "candidate", t.name());
            Ok(
                TargetResult::new(TargetStatus::Deployed).with_message(format!(
                    "simulated: {} on the {candidate} slot ({} ms simulated latency)",
                    req.artifact.version,
                    took.as_millis()
                )),
            )
        })
        .await;
        DeployResult::of("simulate", &req.artifact.version, outcome)
    }

    async fn promote_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let (_, candidate) = Simulate::slots(req);
        for t in &req.targets {
            self.set_live(t, &req.artifact.version);
            if let Ok(mut f) = self.fleet.lock() {
                f.insert(format!("{}#slot", t.moniker), candidate.clone());
            }
        }
        self.route(req, |r| {
            std::mem::swap(&mut r.stable, &mut r.candidate);
            r.weight = 0;
            r.testers = false;
            r.retired = true;
        });
        self.ledger(req, "promote", &candidate);
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "simulated promote: the {candidate} slot serves {} to all traffic",
            req.artifact.version
        ));
        Ok(())
    }

    async fn revert_candidate(&self, req: &Request) -> Result<(), PluginError> {
        let (stable, _) = Simulate::slots(req);
        self.route(req, |r| {
            r.weight = 0;
            r.testers = false;
            r.retired = true;
        });
        self.ledger(req, "revert", &stable);
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "simulated revert: all traffic back on the {stable} slot"
        ));
        Ok(())
    }

    async fn retire_previous(&self, req: &Request) -> Result<(), PluginError> {
        let (stable, _) = Simulate::slots(req);
        self.ledger(req, "retire", &stable);
        self.log
            .for_deployment(&req.deployment_id)
            .info(&format!("simulated retire: the {stable} slot is drained"));
        Ok(())
    }
}

#[async_trait]
impl TrafficRouter for Simulate {
    async fn set_candidate_weight(&self, req: &Request, weight: u32) -> Result<(), PluginError> {
        if weight > 100 {
            return Err(PluginError::Permanent(format!(
                "weight {weight}: a percentage is 0 to 100"
            )));
        }
        self.route(req, |r| r.weight = weight);
        self.ledger(req, "weight", &weight.to_string());
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "simulated router: candidate {weight}% / stable {}%",
            100 - weight
        ));
        Ok(())
    }

    async fn candidate_weight(&self, req: &Request) -> Result<u32, PluginError> {
        let r = self.served(req);
        Ok(if r.retired { 0 } else { r.weight })
    }

    async fn routing_state(&self, req: &Request) -> Result<RoutingState, PluginError> {
        Ok(RoutingState {
            routing: Some(self.served(req)),
            foreign: None,
        })
    }

    /// Simulated requests, second by second over the window, split by the weight served now
    /// and answered as each slot's `traffic` settings say (seeded per second: the same window
    /// reads the same).
    async fn traffic(&self, req: &Request, window: TrafficWindow) -> Result<Traffic, PluginError> {
        let s = self.settings(req)?;
        let Some(sim) = s.traffic else {
            return Err(PluginError::Unimplemented(
                "simulate reports traffic only with `traffic:` in its options or params".into(),
            ));
        };
        let routing = self.served(req);
        let now = crate::sys::now_ms();
        let key = format!("{}/{}", req.application, req.environment);
        let share = if routing.retired {
            0.0
        } else {
            f64::from(routing.weight) / 100.0
        };
        let since = self.live_since.lock().ok().and_then(|mut m| {
            if share > 0.0 {
                Some(*m.entry(key).or_insert(now))
            } else {
                m.get(&key).copied()
            }
        });
        // From the window's start (never before the candidate began serving) to now.
        let from_ms = window.from_ms(now);
        let seconds = u64::try_from((now - from_ms) / 1000).unwrap_or(0).max(1);
        let mut slots = Vec::new();
        for (pool, slot, part) in [
            (&routing.stable, &sim.stable, 1.0 - share),
            (&routing.candidate, &sim.candidate, share),
        ] {
            if pool.slot.is_empty() {
                continue;
            }
            // Second by second, oldest first: (its start, requests, 5xx, p99).
            let mut per_second = Vec::new();
            for i in (0..seconds).rev() {
                let at = now / 1000 - i64::try_from(i).unwrap_or(0);
                let mut rng = fastrand::Rng::with_seed(
                    s.seed.unwrap_or(0) ^ (at as u64).rotate_left(17) ^ pool.slot.len() as u64,
                );
                let n = (sim.rate * part * rng.f64().mul_add(0.2, 0.9)).round() as u64;
                let bursting = slot.burst.filter(|b| {
                    since.is_some_and(|from| {
                        let start = from + i64::try_from(b.after.0.as_millis()).unwrap_or(0);
                        let end = start + i64::try_from(b.lasting.0.as_millis()).unwrap_or(0);
                        (start..end).contains(&(at * 1000))
                    })
                });
                let rate = bursting.map_or(slot.error_rate, |b| b.error_rate);
                let errors = (0..n).filter(|_| rng.f64() < rate).count() as u64;
                let base = slot.p99.0.as_millis() as f64;
                let p99 = (n > 0).then(|| (base * rng.f64().mul_add(0.1, 0.95)).round() as u32);
                per_second.push((at * 1000, n, errors, p99));
            }
            // About twenty intervals to a window.
            let step = usize::try_from((seconds / 20).max(1)).unwrap_or(1);
            let intervals: Vec<TrafficInterval> = per_second
                .chunks(step)
                .map(|c| TrafficInterval {
                    from_ms: c[0].0,
                    requests: c.iter().map(|x| x.1).sum(),
                    errors: c.iter().map(|x| x.2).sum(),
                    p99_ms: c.iter().filter_map(|x| x.3).max(),
                })
                .collect();
            let requests: u64 = intervals.iter().map(|i| i.requests).sum();
            let errors: u64 = intervals.iter().map(|i| i.errors).sum();
            let p99 = intervals.iter().filter_map(|i| i.p99_ms).max();
            slots.push(SlotTraffic {
                slot: pool.slot.clone(),
                version: pool.version.clone(),
                requests,
                responses: [requests - errors, 0, 0, errors],
                retried_away: 0,
                p50_ms: p99.map(|p| p / 3),
                p95_ms: p99.map(|p| p * 4 / 5),
                p99_ms: p99,
                intervals,
                no_latency: false,
            });
        }
        Ok(Traffic {
            slots,
            from_ms,
            window_ms: u64::try_from(now - from_ms).unwrap_or(0),
            source: "simulated traffic".into(),
            since_ms: None,
        })
    }
}

#[async_trait]
impl TesterRouter for Simulate {
    async fn route_testers(
        &self,
        req: &Request,
    ) -> Result<std::collections::BTreeMap<String, String>, PluginError> {
        self.route(req, |r| r.testers = true);
        self.ledger(req, "testers", "X-Canary");
        self.log
            .for_deployment(&req.deployment_id)
            .info("simulated router: requests with X-Canary: 1 reach the candidate");
        Ok([
            ("header".to_owned(), "X-Canary: 1".to_owned()),
            ("simulated".to_owned(), "true".to_owned()),
        ]
        .into_iter()
        .collect())
    }
}

#[async_trait]
impl SlotScaler for Simulate {
    async fn scale_candidate(&self, req: &Request, percent: u32) -> Result<(), PluginError> {
        let n = req.targets.len();
        let up = (n * usize::try_from(percent).unwrap_or(100)).div_ceil(100);
        self.route(req, |r| r.scale = percent);
        self.ledger(req, "scale", &percent.to_string());
        self.log.for_deployment(&req.deployment_id).info(&format!(
            "simulated scale: the candidate runs on {up} of {n} targets ({percent}%)"
        ));
        Ok(())
    }
}
