//! Writing a unit's task onto its Action's status. The status is shared: the
//! controller writes the phase and the other tasks, each unit's agent its own
//! task. So a write reads the Action, changes only this machine's task, and
//! replaces the status at the version it read; a conflict reads again.

use std::time::Duration;

use kube::{Api, api::PostParams};
use olm_api::{
    model::{Action, UnitTask},
    substrate::AGENT_FIELD_MANAGER,
};
use olm_runtime::{ErrorClass, classify};

/// How many times a write is tried before it is given up (a conflict is
/// tried again at once, another failure after a pause).
const ATTEMPTS: usize = 30;
/// The pause after a failure other than a conflict.
const PAUSE: Duration = Duration::from_secs(1);

/// Why a task could not be written.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The API server refused, or could not be reached.
    #[error("cannot write the task of unit {unit} on Action {action}")]
    Write {
        /// The Action.
        action: String,
        /// The unit.
        unit: String,
        /// The last failure.
        #[source]
        source: kube::Error,
    },
}

/// Changes the task of `unit` on Action `name` by `change`, which sees the
/// task as it is now and returns it changed, or `None` to leave it (the
/// user cancelled it, the task ended elsewhere). The task written, if any;
/// `None` too when the Action or its task is gone.
pub async fn write_task(
    api: &Api<Action>,
    name: &str,
    unit: &str,
    change: impl Fn(&UnitTask) -> Option<UnitTask>,
) -> Result<Option<UnitTask>, ReportError> {
    let fail = |source| ReportError::Write {
        action: name.to_owned(),
        unit: unit.to_owned(),
        source,
    };
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let mut action = match api.get_opt(name).await {
            Ok(Some(action)) => action,
            Ok(None) => return Ok(None),
            Err(error) => {
                last = Some(error);
                tokio::time::sleep(PAUSE).await;
                continue;
            }
        };
        let Some(task) = action
            .status
            .as_mut()
            .and_then(|s| s.tasks.iter_mut().find(|t| t.unit == unit))
        else {
            return Ok(None);
        };
        let Some(changed) = change(task) else {
            return Ok(None);
        };
        *task = changed.clone();
        let params = PostParams {
            field_manager: Some(AGENT_FIELD_MANAGER.to_owned()),
            ..PostParams::default()
        };
        match api.replace_status(name, &params, &action).await {
            Ok(_) => return Ok(Some(changed)),
            Err(error) if classify(&error) == ErrorClass::Conflict => last = Some(error),
            Err(error) if classify(&error) == ErrorClass::Gone => return Ok(None),
            Err(error) => {
                tracing::debug!(action = name, unit, %error, "cannot write the task: retrying");
                last = Some(error);
                tokio::time::sleep(PAUSE).await;
            }
        }
    }
    Err(fail(last.unwrap_or_else(|| {
        kube::Error::Service("no attempt was made".into())
    })))
}
