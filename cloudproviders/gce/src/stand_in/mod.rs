//! A local stand-in for the Compute Engine REST endpoints the provider calls (there is no GCE
//! emulator): JSON over HTTP in the shapes of the API reference, state in memory, and scripted
//! outcomes for what a real project cannot be made to do on demand (stockouts, quota, partial
//! bulk starts, resize requests that queue and fail, operations that finish with an error, rate
//! limits). Used by this crate's tests and the controller's end-to-end test.
//!
//! Paths are `/compute/v1/projects/{project}/…` as the client sends them; the query string is
//! read only for `size` (resize), `filter` (aggregated instances) and ignored otherwise.

mod file;
mod handlers;
mod world;

pub use file::{WorldFile, WorldFileError};

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

pub use world::{BulkScript, Managed, Mig, Request, ResizeScript, Vm, World};

/// A running stand-in.
#[derive(Debug)]
pub struct StandIn {
    /// `http://127.0.0.1:<port>`.
    pub endpoint: String,
    /// Its state, to set up and inspect.
    pub world: Arc<Mutex<World>>,
    task: tokio::task::JoinHandle<()>,
}

impl StandIn {
    /// Starts one on a free loopback port.
    ///
    /// # Errors
    /// When no port can be bound.
    pub async fn start(world: World) -> std::io::Result<Self> {
        Self::start_on(world, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts one on `address`.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn start_on(world: World, address: SocketAddr) -> std::io::Result<Self> {
        let world = Arc::new(Mutex::new(world));
        let listener = tokio::net::TcpListener::bind(address).await?;
        let endpoint = format!("http://{}", listener.local_addr()?);
        let app = axum::Router::new()
            .fallback(handlers::handle)
            .with_state(Arc::clone(&world));
        let task = tokio::spawn(async move {
            if let Err(err) = axum::serve(listener, app).await {
                tracing::error!(error = %err, "stand-in stopped");
            }
        });
        Ok(Self {
            endpoint,
            world,
            task,
        })
    }

    /// Locks the state.
    ///
    /// # Panics
    /// When a handler panicked while holding it (a bug in the stand-in).
    pub fn world(&self) -> std::sync::MutexGuard<'_, World> {
        self.world
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A connection to it: anonymous, fast polls and retries.
    #[must_use]
    pub fn connection(&self) -> crate::Connection {
        crate::Connection {
            endpoint: Some(self.endpoint.clone()),
            anonymous: true,
            attempts: 4,
            retry_delay: std::time::Duration::from_millis(10),
            poll_delay: std::time::Duration::from_millis(10),
        }
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}
