//! The handle an application waits on: blocking (`wait`, `wait_timeout`) or as a future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::packet::TaskId;
use crate::runtime::error::JobError;
use crate::runtime::job::JobOutput;
use crate::runtime::work::JobRecord;

/// A submitted job: wait on it (blocking), or `.await` it (it is a [`Future`]; no runtime
/// needed). Dropping the handle does not cancel the job.
pub struct JobHandle {
    state: HandleState,
}

enum HandleState {
    /// On the nodes: the record its packets report to.
    Nodes(Arc<JobRecord>),
    /// Run on the submitting thread (docs/ALGORITHM.md §15.6): finished when handed out.
    /// `outcome` is `None` once taken.
    Done {
        task: TaskId,
        latency: Duration,
        outcome: Option<Result<JobOutput, JobError>>,
    },
}

impl fmt::Debug for JobHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobHandle")
            .field("task", &self.task())
            .field("finished", &self.is_finished())
            .finish()
    }
}

impl JobHandle {
    /// The handle of a job whose packets run on the nodes.
    pub(crate) fn on_nodes(job: Arc<JobRecord>) -> Self {
        JobHandle {
            state: HandleState::Nodes(job),
        }
    }

    /// The handle of a job the submitting thread ran: its result, and the time from its
    /// submission until the result was handed to the caller.
    pub(crate) fn done(
        task: TaskId,
        outcome: Result<JobOutput, JobError>,
        latency: Duration,
    ) -> Self {
        JobHandle {
            state: HandleState::Done {
                task,
                latency,
                outcome: Some(outcome),
            },
        }
    }

    /// The job's id.
    pub fn task(&self) -> TaskId {
        match &self.state {
            HandleState::Nodes(job) => job.task,
            HandleState::Done { task, .. } => *task,
        }
    }

    /// Whether the job has finished (successfully or not).
    pub fn is_finished(&self) -> bool {
        match &self.state {
            HandleState::Nodes(job) => job.is_finished(),
            HandleState::Done { .. } => true,
        }
    }

    /// Time from submission to the last packet's completion, once finished.
    pub fn latency(&self) -> Option<Duration> {
        match &self.state {
            HandleState::Nodes(job) => job.latency(),
            HandleState::Done { latency, .. } => Some(*latency),
        }
    }

    /// Blocks until the job finishes and returns its output.
    ///
    /// # Errors
    /// The job's [`JobError`]; [`JobError::OnWorkerThread`] when called, on a job not finished
    /// yet, on a worker thread of the service (from a waker or callback it ran there), which
    /// the job may need to run on: a deadlock refused.
    pub fn wait(mut self) -> Result<JobOutput, JobError> {
        match &mut self.state {
            HandleState::Nodes(job) => job.wait(),
            HandleState::Done { outcome, .. } => take_done(outcome),
        }
    }

    /// Blocks for at most `timeout`; `None` if the job has not finished by then (the handle
    /// stays usable).
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<Result<JobOutput, JobError>> {
        match &mut self.state {
            HandleState::Nodes(job) => job.wait_timeout(timeout),
            HandleState::Done { outcome, .. } => Some(take_done(outcome)),
        }
    }
}

fn take_done(outcome: &mut Option<Result<JobOutput, JobError>>) -> Result<JobOutput, JobError> {
    outcome.take().unwrap_or(Err(JobError::ResultTaken))
}

impl Future for JobHandle {
    type Output = Result<JobOutput, JobError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.state {
            HandleState::Nodes(job) => job.poll_outcome(cx),
            HandleState::Done { outcome, .. } => Poll::Ready(take_done(outcome)),
        }
    }
}
