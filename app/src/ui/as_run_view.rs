//! "Simulate this benchmark" on the page (browser only): the click adopts the files'
//! setup, hands each file's benchmark as run ([`crate::as_run`]) to the sweep workers,
//! collects one point per file for the report card, and starts the sweep of the adopted
//! parameters once it is done (so the chart follows them too).

use super::{next_id, pool, set_root_data, start_sweep, Ctx};
use crate::adopt::page_params_for;
use crate::as_run::{self, AsRunState};
use crate::job::{shard, Job, Reply, Task};
use crate::measured::MeasuredSeries;
use leptos::prelude::*;

/// Adopts `series`' setup and, when its files record their benchmarks, simulates each as
/// it was run. Without such files (or with parameters that cannot run) it only adopts,
/// and the sweep follows the parameters as after any change.
pub(super) fn start(c: Ctx, series: MeasuredSeries) {
    let adopted = c
        .params
        .with_untracked(|p| page_params_for(&series, p))
        .params;
    let items = as_run::items(&series);
    let runnable = !items.is_empty() && adopted.check().is_ok();
    let Some(pool) = pool().filter(|_| runnable) else {
        c.params.set(adopted);
        return;
    };
    let n = pool.borrow().len();
    let id = next_id();
    // The sweep waits for the benchmark: the parameters count as swept until it is done.
    c.swept.set_value(Some(adopted.clone()));
    c.params.set(adopted.clone());
    // The largest benchmarks first: they take longest.
    let mut sorted = items.clone();
    sorted.sort_by_key(|i| std::cmp::Reverse(i.run.requests));
    let tasks = sorted
        .into_iter()
        .map(|item| Task::Benchmark {
            item: Box::new(item),
        })
        .collect();
    let shares = shard(tasks, n);
    c.as_run.set(AsRunState {
        id,
        series: series.name.clone(),
        params: Some(adopted.clone()),
        label: as_run::describe(&items, adopted.seeds),
        total: as_run::total_runs(&items, adopted.seeds),
        done: vec![0; n],
        finished: shares.iter().map(|s| s.is_empty()).collect(),
        running: true,
        ..AsRunState::default()
    });
    pool.borrow_mut()
        .submit(Job::per_share(id, &adopted, shares));
}

/// Whether `reply` belongs to the running benchmark-as-run job.
pub(super) fn claims(c: Ctx, reply: &Reply) -> bool {
    let (mine, running) = c.as_run.with_untracked(|s| (s.id, s.running));
    let id = match reply {
        Reply::Progress { id, .. }
        | Reply::Point { id, .. }
        | Reply::Done { id }
        | Reply::Error { id, .. } => *id,
        _ => return false,
    };
    running && id == mine
}

/// Takes a reply of the job from worker `w`.
pub(super) fn on_reply(c: Ctx, w: usize, reply: Reply) {
    let mut over = false;
    c.as_run.update(|s| match reply {
        Reply::Progress { done, .. } => {
            if let Some(d) = s.done.get_mut(w) {
                *d = done;
            }
        }
        Reply::Point { point, .. } => s.add(point),
        Reply::Done { .. } => {
            if let Some(f) = s.finished.get_mut(w) {
                *f = true;
            }
            if s.finished.iter().all(|f| *f) {
                s.running = false;
                over = true;
            }
        }
        Reply::Error { message, .. } => {
            s.running = false;
            s.error = Some(message);
            over = true;
        }
        _ => {}
    });
    if over {
        let id = c.as_run.with_untracked(|s| s.id);
        set_root_data("as-run-done", &id.to_string());
        // Now the chart: the sweep of the same parameters.
        start_sweep(c);
    }
}

/// Marks a running job as stopped: the workers were given other work.
pub(super) fn forget(c: Ctx) {
    if c.as_run.with_untracked(|s| s.running) {
        c.as_run.update(|s| {
            s.running = false;
            s.error = Some("stopped before the end: the workers were given other work".into());
        });
    }
}
