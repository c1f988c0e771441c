//! The contract of `AtomicIncreaseSize` (proto/extensions.proto and the providers' READMEs): `1 <= minCount <= count`; one scale-up or scale-down of a provider at a
//! time, so sizes are read, checked and written together; a request id answered before gets
//! the same instance ids again without starting anything (the controller retries a call whose
//! answer it lost with the same id); what a start returns is remembered under its id.
//!
//! The cloud's part is [`GangStarts::start`]: check its own limits, start `minCount..=count`
//! machines together or none, and roll back a partial start before returning its error.

use std::collections::BTreeMap;
use std::future::Future;

use tokio::sync::Mutex;

use crate::error::ProviderError;
use crate::model::AtomicIncrease;
use crate::skeleton::sizes::check_atomic_bounds;

/// Where a provider keeps the answers to atomic requests (in memory, or in a state file that
/// survives a restart).
pub trait RequestBook {
    /// The instance ids request `request_id` of group `group` was answered with.
    fn answered(&self, group: &str, request_id: &str) -> Option<Vec<String>>;
    /// Remembers the answer to request `request_id` of group `group`.
    fn remember(&mut self, group: &str, request_id: &str, ids: Vec<String>);
}

/// Answers kept in memory, by request id (request ids are unique over all groups).
#[derive(Debug, Default)]
pub struct Requests {
    answers: BTreeMap<String, Vec<String>>,
}

impl RequestBook for Requests {
    fn answered(&self, _group: &str, request_id: &str) -> Option<Vec<String>> {
        self.answers.get(request_id).cloned()
    }

    fn remember(&mut self, _group: &str, request_id: &str, ids: Vec<String>) {
        self.answers.insert(request_id.to_owned(), ids);
    }
}

/// A cloud's part of an atomic start.
#[tonic::async_trait]
pub trait GangStarts: Send + Sync {
    /// What the scaling lock guards: at least the request book.
    type Book: RequestBook + Send;

    /// The scaling lock: held for the whole atomic start, and by every other change of sizes.
    fn scaling(&self) -> &Mutex<Self::Book>;

    /// Checks made before the lock is taken (the group exists, for a provider whose groups
    /// need no read of the cloud).
    async fn before_lock(&self, request: &AtomicIncrease) -> Result<(), ProviderError> {
        let _ = request;
        Ok(())
    }

    /// Starts `request.min_count..=request.count` machines together or none, with the lock
    /// held (`book` is what it guards); returns the instance ids.
    async fn start(
        &self,
        book: &mut Self::Book,
        request: &AtomicIncrease,
    ) -> Result<Vec<String>, ProviderError>;

    /// Keeps what [`RequestBook::remember`] changed (a state file); called with the lock held.
    fn keep(&self, book: &Self::Book) -> Result<(), ProviderError> {
        let _ = book;
        Ok(())
    }

    /// Logs that `request` was answered before and its ids are returned again.
    fn log_replay(&self, request: &AtomicIncrease) {
        tracing::info!(
            group = request.id,
            request = request.request_id,
            "request already answered"
        );
    }
}

/// `AtomicIncreaseSize` over `cloud`: bounds, the scaling lock, the replay of an answered
/// request id, the start, and the answer remembered.
///
/// # Errors
/// [`ProviderError::InvalidArgument`] for bounds out of `1 <= minCount <= count`; those of
/// [`GangStarts::before_lock`], [`GangStarts::start`] and [`GangStarts::keep`].
pub async fn atomic_increase<C: GangStarts + ?Sized>(
    cloud: &C,
    request: &AtomicIncrease,
) -> Result<Vec<String>, ProviderError> {
    check_atomic_bounds(request)?;
    cloud.before_lock(request).await?;
    let mut book = cloud.scaling().lock().await;
    let keyed = !request.request_id.is_empty();
    if keyed && let Some(ids) = book.answered(&request.id, &request.request_id) {
        cloud.log_replay(request);
        return Ok(ids);
    }
    let ids = cloud.start(&mut book, request).await?;
    if keyed {
        book.remember(&request.id, &request.request_id, ids.clone());
        cloud.keep(&book)?;
    }
    Ok(ids)
}

/// [`atomic_increase`] for a cloud that keeps its answers in memory ([`Requests`] behind
/// `scaling`) and starts a gang with one call that needs nothing the lock guards.
///
/// # Errors
/// Those of [`atomic_increase`] and of `start`.
pub async fn atomic_increase_with<F, Fut>(
    scaling: &Mutex<Requests>,
    request: &AtomicIncrease,
    start: F,
) -> Result<Vec<String>, ProviderError>
where
    F: FnOnce() -> Fut + Send,
    Fut: Future<Output = Result<Vec<String>, ProviderError>> + Send,
{
    /// The one start of this call, as a [`GangStarts`].
    struct Once<'a, F> {
        scaling: &'a Mutex<Requests>,
        start: std::sync::Mutex<Option<F>>,
    }

    #[tonic::async_trait]
    impl<F, Fut> GangStarts for Once<'_, F>
    where
        F: FnOnce() -> Fut + Send,
        Fut: Future<Output = Result<Vec<String>, ProviderError>> + Send,
    {
        type Book = Requests;

        fn scaling(&self) -> &Mutex<Requests> {
            self.scaling
        }

        async fn start(
            &self,
            _book: &mut Requests,
            _request: &AtomicIncrease,
        ) -> Result<Vec<String>, ProviderError> {
            let start = self
                .start
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take();
            match start {
                Some(start) => start().await,
                // `atomic_increase` starts once per call.
                None => Err(ProviderError::Internal {
                    message: "a gang was started twice in one call".to_owned(),
                }),
            }
        }
    }

    let once = Once {
        scaling,
        start: std::sync::Mutex::new(Some(start)),
    };
    atomic_increase(&once, request).await
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::time::Duration;

    use super::*;

    /// A cloud of one group with `max` machines that names them `m<n>`; a start takes a
    /// moment, so two unserialised starts would both see the room one of them uses.
    #[derive(Default)]
    struct Cloud {
        book: Mutex<Requests>,
        size: AtomicI32,
        starts: AtomicI32,
        max: i32,
    }

    #[tonic::async_trait]
    impl GangStarts for Cloud {
        type Book = Requests;

        fn scaling(&self) -> &Mutex<Requests> {
            &self.book
        }

        async fn start(
            &self,
            _book: &mut Requests,
            request: &AtomicIncrease,
        ) -> Result<Vec<String>, ProviderError> {
            self.starts.fetch_add(1, Ordering::SeqCst);
            let size = self.size.load(Ordering::SeqCst);
            let room =
                crate::skeleton::sizes::headroom(&request.id, size, self.max, request.min_count)?;
            tokio::time::sleep(Duration::from_millis(20)).await;
            let count = request.count.min(room);
            self.size.store(size + count, Ordering::SeqCst);
            Ok((size..size + count).map(|n| format!("m{n}")).collect())
        }
    }

    fn request(count: i32, min_count: i32, request_id: &str) -> AtomicIncrease {
        AtomicIncrease {
            id: "g".into(),
            count,
            min_count,
            request_id: request_id.into(),
        }
    }

    fn cloud(max: i32) -> Cloud {
        Cloud {
            max,
            ..Cloud::default()
        }
    }

    #[tokio::test]
    async fn a_retried_request_id_gets_the_same_ids_and_starts_nothing() {
        let cloud = cloud(8);
        let first = atomic_increase(&cloud, &request(2, 2, "r-1")).await;
        assert_eq!(first, Ok(vec!["m0".to_owned(), "m1".to_owned()]));
        let again = atomic_increase(&cloud, &request(2, 2, "r-1")).await;
        assert_eq!(again, first);
        assert_eq!(cloud.starts.load(Ordering::SeqCst), 1);
        assert_eq!(cloud.size.load(Ordering::SeqCst), 2);
        // Another id is another gang.
        let other = atomic_increase(&cloud, &request(2, 2, "r-2")).await;
        assert_eq!(other, Ok(vec!["m2".to_owned(), "m3".to_owned()]));
    }

    #[tokio::test]
    async fn requests_without_an_id_are_never_replayed() {
        let cloud = cloud(8);
        assert!(atomic_increase(&cloud, &request(1, 1, "")).await.is_ok());
        assert!(atomic_increase(&cloud, &request(1, 1, "")).await.is_ok());
        assert_eq!(cloud.starts.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_failed_start_is_not_remembered() {
        let cloud = cloud(1);
        assert!(
            atomic_increase(&cloud, &request(2, 2, "r-1"))
                .await
                .is_err()
        );
        cloud.size.store(-1, Ordering::SeqCst);
        // The same id, once there is room, starts (a refusal is not an answer to replay).
        assert!(atomic_increase(&cloud, &request(2, 2, "r-1")).await.is_ok());
        assert_eq!(cloud.starts.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn bounds_are_checked_before_anything_starts() {
        let cloud = cloud(8);
        for (count, min_count) in [(2, 0), (1, 2), (0, 0), (-1, -1)] {
            let answer = atomic_increase(&cloud, &request(count, min_count, "r")).await;
            assert!(
                matches!(answer, Err(ProviderError::InvalidArgument { .. })),
                "count {count} minCount {min_count}: {answer:?}"
            );
        }
        assert_eq!(cloud.starts.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn concurrent_starts_are_serialised_by_the_scaling_lock() {
        // Room for 3: two gangs of minCount 2 started at once cannot both fit, and must not
        // both be told yes.
        let cloud = Arc::new(cloud(3));
        let a = tokio::spawn({
            let cloud = Arc::clone(&cloud);
            async move { atomic_increase(&*cloud, &request(2, 2, "a")).await }
        });
        let b = tokio::spawn({
            let cloud = Arc::clone(&cloud);
            async move { atomic_increase(&*cloud, &request(2, 2, "b")).await }
        });
        let (a, b) = (a.await, b.await);
        let answers = [a.expect("task a"), b.expect("task b")];
        assert_eq!(
            answers.iter().filter(|a| a.is_ok()).count(),
            1,
            "{answers:?}"
        );
        assert!(
            answers
                .iter()
                .any(|a| matches!(a, Err(ProviderError::InvalidArgument { .. })))
        );
        assert_eq!(cloud.size.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn the_closure_form_replays_and_starts_at_most_once() {
        let scaling = Mutex::new(Requests::default());
        let starts = AtomicI32::new(0);
        let counted = &starts;
        let start = move || async move {
            counted.fetch_add(1, Ordering::SeqCst);
            Ok(vec!["m0".to_owned()])
        };
        let first = atomic_increase_with(&scaling, &request(1, 1, "r-1"), start).await;
        let again = atomic_increase_with(&scaling, &request(1, 1, "r-1"), start).await;
        assert_eq!(first, Ok(vec!["m0".to_owned()]));
        assert_eq!(again, first);
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }
}
