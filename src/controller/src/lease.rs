//! Leader election with a `coordination.k8s.io/v1` Lease, as client-go's
//! leaderelection does it: one replica holds the lease and renews it; the
//! others take it over only once it has not been renewed for its duration.
//!
//! Every write carries the resourceVersion it was decided from (PUT) or is a
//! create, so two candidates racing for an expired lease cannot both win: the
//! loser gets 409 Conflict (or 409 AlreadyExists) and stays a follower.
//!
//! The holder stops acting as leader when it has not managed to renew for the
//! renew deadline, which is shorter than the lease duration, so it stops
//! before anyone else may start.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, PostParams};
use tokio::sync::watch;

/// Settings of the election.
#[derive(Debug, Clone)]
pub struct LeaseConfig {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This replica's identity (pod name).
    pub identity: String,
    /// How long a lease is valid after its last renewal.
    pub lease_duration: SignedDuration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: SignedDuration,
    /// How often to try to acquire or renew.
    pub retry_period: SignedDuration,
}

/// What to do with the lease as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// No lease exists: create it, held by us.
    Create,
    /// We hold it: renew.
    Renew,
    /// Someone else held it and let it expire (or released it): take it over.
    TakeOver,
    /// Someone else holds it.
    Follow {
        /// The holder.
        holder: String,
    },
}

/// Decides from the lease as read at `now`.
#[must_use]
pub fn decide(lease: Option<&Lease>, identity: &str, now: Timestamp) -> Decision {
    let Some(spec) = lease.and_then(|l| l.spec.as_ref()) else {
        return if lease.is_some() {
            Decision::TakeOver
        } else {
            Decision::Create
        };
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == identity {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::TakeOver;
    }
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds.unwrap_or(0)));
    let renewed = spec
        .renew_time
        .as_ref()
        .or(spec.acquire_time.as_ref())
        .map(|t| t.0);
    let expired = renewed.is_none_or(|r| r.checked_add(duration).is_ok_and(|end| end <= now));
    if expired {
        Decision::TakeOver
    } else {
        Decision::Follow {
            holder: holder.to_string(),
        }
    }
}

/// A failed lease request.
#[derive(Debug, thiserror::Error)]
#[error("unable to {action} Lease {namespace}/{name}")]
pub struct LeaseError {
    /// What was attempted.
    pub action: &'static str,
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// The API server's answer.
    #[source]
    pub source: kube::Error,
}

/// One candidate.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn seconds(d: SignedDuration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

impl LeaderElector {
    /// A candidate using `client`.
    #[must_use]
    pub fn new(client: kube::Client, config: LeaseConfig) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    fn error(&self, action: &'static str, source: kube::Error) -> LeaseError {
        LeaseError {
            action,
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
            source,
        }
    }

    /// Tries once to acquire or renew. `Ok(true)` means we hold the lease
    /// until `now + lease_duration`; a lost race is `Ok(false)`.
    ///
    /// # Errors
    /// The API server could not be reached or refused for another reason.
    pub async fn try_acquire_or_renew(&self, now: Timestamp) -> Result<bool, LeaseError> {
        let current = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error("read", e))?;
        let decision = decide(current.as_ref(), &self.config.identity, now);
        let me = Some(self.config.identity.clone());
        let result = match (decision, current) {
            (Decision::Follow { .. }, _) => return Ok(false),
            (Decision::Create, _) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: me,
                        lease_duration_seconds: Some(seconds(self.config.lease_duration)),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                self.api
                    .create(&PostParams::default(), &lease)
                    .await
                    .map(|_| ())
            }
            (Decision::Renew, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(Default::default);
                spec.renew_time = Some(MicroTime(now));
                spec.lease_duration_seconds = Some(seconds(self.config.lease_duration));
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
                    .map(|_| ())
            }
            (Decision::TakeOver, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(Default::default);
                spec.holder_identity = me;
                spec.acquire_time = Some(MicroTime(now));
                spec.renew_time = Some(MicroTime(now));
                spec.lease_duration_seconds = Some(seconds(self.config.lease_duration));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await
                    .map(|_| ())
            }
            // Renew or take over without a lease read: cannot happen, as
            // `decide` only says so for an existing lease.
            (Decision::Renew | Decision::TakeOver, None) => return Ok(false),
        };
        match result {
            Ok(()) => Ok(true),
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(e) => Err(self.error("write", e)),
        }
    }

    /// Gives the lease up (on shutdown) so another replica can take over at
    /// once rather than after the lease duration.
    ///
    /// # Errors
    /// The lease could not be read or written.
    pub async fn release(&self) -> Result<(), LeaseError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(|e| self.error("read", e))?
        else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
            Err(e) => Err(self.error("release", e)),
        }
    }

    /// Campaigns until `shutdown` turns true, publishing whether we lead on
    /// `leading`. Leadership is dropped when renewal has failed for the renew
    /// deadline. The lease is released on shutdown.
    pub async fn run(self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let retry = std::time::Duration::try_from(self.config.retry_period)
            .unwrap_or(std::time::Duration::from_secs(2));
        let mut last_renewed: Option<Timestamp> = None;
        // A standby says so once (and again after it led and lost), not on every retry.
        let mut said_standby = false;
        loop {
            let now = Timestamp::now();
            match self.try_acquire_or_renew(now).await {
                Ok(true) => {
                    if last_renewed.is_none() {
                        tracing::info!(identity = %self.config.identity, lease = %self.config.name, "became leader");
                    }
                    last_renewed = Some(now);
                    said_standby = false;
                }
                Ok(false) => {
                    if last_renewed.take().is_some() {
                        tracing::warn!(identity = %self.config.identity, lease = %self.config.name, "lost leadership: another replica holds the lease");
                    }
                    if !said_standby {
                        tracing::info!(identity = %self.config.identity, lease = %self.config.name, namespace = %self.config.namespace, "standing by: another replica holds the lease; this one acts only if it takes the lease over");
                        said_standby = true;
                    }
                }
                Err(error) => tracing::warn!(%error, "leader election"),
            }
            let deadline_ok = last_renewed.is_some_and(|r| {
                r.checked_add(self.config.renew_deadline)
                    .is_ok_and(|end| end > Timestamp::now())
            });
            if !deadline_ok && last_renewed.is_some() {
                tracing::warn!(
                    identity = %self.config.identity,
                    "lost leadership: could not renew the lease within the renew deadline; stepping down"
                );
                last_renewed = None;
            }
            let is_leader = last_renewed.is_some();
            leading.send_if_modified(|v| std::mem::replace(v, is_leader) != is_leader);
            tokio::select! {
                () = tokio::time::sleep(retry) => {}
                _ = shutdown.wait_for(|stop| *stop) => break,
            }
        }
        leading.send_replace(false);
        if let Err(error) = self.release().await {
            tracing::warn!(%error, "could not release the lease");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + s).unwrap()
    }

    fn lease(holder: &str, renewed: i64, duration: i32) -> Lease {
        Lease {
            metadata: ObjectMeta::default(),
            spec: Some(LeaseSpec {
                holder_identity: Some(holder.into()),
                lease_duration_seconds: Some(duration),
                renew_time: Some(MicroTime(t(renewed))),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn no_lease_means_create() {
        assert_eq!(decide(None, "a", t(0)), Decision::Create);
    }

    #[test]
    fn our_own_lease_is_renewed_even_if_late() {
        assert_eq!(
            decide(Some(&lease("a", 0, 15)), "a", t(100)),
            Decision::Renew
        );
    }

    #[test]
    fn someone_elses_live_lease_is_followed_until_it_expires() {
        let l = lease("b", 0, 15);
        assert_eq!(
            decide(Some(&l), "a", t(14)),
            Decision::Follow { holder: "b".into() }
        );
        assert_eq!(decide(Some(&l), "a", t(15)), Decision::TakeOver);
    }

    #[test]
    fn released_lease_is_taken_over_at_once() {
        let mut l = lease("b", 0, 15);
        if let Some(s) = l.spec.as_mut() {
            s.holder_identity = None;
        }
        assert_eq!(decide(Some(&l), "a", t(1)), Decision::TakeOver);
    }
}
