//! A small pool of sweep workers (browser only): spawn, hand each a job, forward replies,
//! cancel by terminating and respawning. What the page makes of a reply it cannot read
//! ([`unreadable`]) is plain Rust, tested natively.

use crate::job::Reply;

/// How the message of a reply that could not be read begins.
pub const UNREADABLE: &str = "a reply from the sweep worker could not be read";

/// The error standing for a reply that does not parse: attributed to the job it names
/// (so the page shows it with that job, and drops it when the job is stale), and saying
/// which reply it was. serde_json writes a NaN or an infinity as `null`, which then does
/// not read back as a number: the message says so when that is the cause.
pub fn unreadable(text: &str, e: &serde_json::Error) -> Reply {
    let value = serde_json::from_str::<serde_json::Value>(text).ok();
    let (kind, body) = match value.as_ref().and_then(|v| v.as_object()?.iter().next()) {
        Some((k, v)) => (k.as_str(), Some(v)),
        None => ("unknown", None),
    };
    let id = body
        .and_then(|b| b.get("id"))
        .and_then(serde_json::Value::as_u64)
        .unwrap_or(0);
    let why = if e.to_string().contains("null, expected f64") {
        " (a number in it was not finite: NaN or infinity, sent as null)"
    } else {
        ""
    };
    Reply::Error {
        id,
        message: format!("{UNREADABLE}: its {kind} reply{why}: {e}"),
    }
}

#[cfg(target_arch = "wasm32")]
pub use browser::*;

/// The pool itself (browser only).
#[cfg(target_arch = "wasm32")]
mod browser {
    use super::{unreadable, UNREADABLE};
    use crate::job::{Job, Reply};
    use gloo_events::EventListener;
    use std::cell::RefCell;
    use std::rc::Rc;
    use wasm_bindgen::{JsCast, JsValue};
    use web_sys::{ErrorEvent, MessageEvent, Worker};

    // The workers are spawned with web-sys rather than gloo-worker: gloo-worker's
    // registrar/spawner model wraps every message in its own envelope (bincode by
    // default) and stops a worker by a message it reads between jobs, while the page
    // cancels a running sweep by terminating its worker mid-job (a job runs to its end
    // once started) and the messages stay the JSON replies of [`Reply`]. The messages
    // and errors are listened to with gloo-events.

    /// Where app/build.mjs puts the worker's loader (next to index.html).
    pub const WORKER_URL: &str = "./worker_loader.js";

    type OnReply = Rc<dyn Fn(usize, Reply)>;

    struct Slot {
        worker: Worker,
        ready: bool,
        busy: bool,
        queued: Option<String>,
        // Removed from the worker when the slot drops.
        _on_message: EventListener,
        _on_error: EventListener,
    }

    /// The pool; clone the `Rc` freely.
    pub struct Pool {
        slots: Vec<Option<Slot>>,
        on_reply: OnReply,
        me: std::rc::Weak<RefCell<Pool>>,
    }

    impl std::fmt::Debug for Pool {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Pool({} workers)", self.slots.len())
        }
    }

    impl Pool {
        /// Starts `n` workers; `on_reply(worker_index, reply)` gets every reply.
        pub fn new(n: usize, on_reply: impl Fn(usize, Reply) + 'static) -> Rc<RefCell<Pool>> {
            let pool = Rc::new(RefCell::new(Pool {
                slots: Vec::new(),
                on_reply: Rc::new(on_reply),
                me: Default::default(),
            }));
            pool.borrow_mut().me = Rc::downgrade(&pool);
            for i in 0..n.max(1) {
                let slot = pool.borrow().spawn(i);
                pool.borrow_mut().slots.push(slot);
            }
            pool
        }

        pub fn len(&self) -> usize {
            self.slots.len()
        }

        pub fn is_empty(&self) -> bool {
            self.slots.is_empty()
        }

        fn spawn(&self, i: usize) -> Option<Slot> {
            let worker = match Worker::new(WORKER_URL) {
                Ok(w) => w,
                Err(e) => {
                    (self.on_reply)(
                        i,
                        Reply::Error {
                            id: 0,
                            message: format!("could not start a worker: {e:?}"),
                        },
                    );
                    return None;
                }
            };
            let me = self.me.clone();
            let on_reply = self.on_reply.clone();
            let on_message = EventListener::new(&worker, "message", move |ev| {
                let text = ev
                    .unchecked_ref::<MessageEvent>()
                    .data()
                    .as_string()
                    .unwrap_or_default();
                let reply =
                    serde_json::from_str::<Reply>(&text).unwrap_or_else(|e| unreadable(&text, &e));
                if let Some(pool) = me.upgrade() {
                    let mut send = None;
                    if let Ok(mut p) = pool.try_borrow_mut() {
                        if let Some(Some(slot)) = p.slots.get_mut(i) {
                            match &reply {
                                // An unreadable reply is not the end of the job: the worker
                                // is still running it (and a new job must cancel it).
                                Reply::Error { message, .. } if message.starts_with(UNREADABLE) => {
                                }
                                Reply::Ready => {
                                    slot.ready = true;
                                    send = slot.queued.take().map(|q| (slot.worker.clone(), q));
                                    slot.busy = send.is_some();
                                }
                                Reply::Done { .. } | Reply::Error { .. } => slot.busy = false,
                                _ => {}
                            }
                        }
                    }
                    if let Some((w, q)) = send {
                        let _ = w.post_message(&JsValue::from_str(&q));
                    }
                }
                if !matches!(reply, Reply::Ready) {
                    on_reply(i, reply);
                }
            });
            let on_reply = self.on_reply.clone();
            let on_error = EventListener::new(&worker, "error", move |ev| {
                let message = ev
                    .dyn_ref::<ErrorEvent>()
                    .map_or_else(|| "(no message)".to_string(), ErrorEvent::message);
                on_reply(
                    i,
                    Reply::Error {
                        id: 0,
                        message: format!("worker failed: {message}"),
                    },
                );
            });
            Some(Slot {
                worker,
                ready: false,
                busy: false,
                queued: None,
                _on_message: on_message,
                _on_error: on_error,
            })
        }

        /// Whether any worker is running a job.
        pub fn busy(&self) -> bool {
            self.slots
                .iter()
                .flatten()
                .any(|s| s.busy || s.queued.is_some())
        }

        /// Stops every running job (terminates busy workers and starts fresh ones).
        pub fn cancel(&mut self) {
            for i in 0..self.slots.len() {
                let busy = self.slots[i]
                    .as_ref()
                    .is_some_and(|s| s.busy || s.queued.is_some());
                if busy {
                    if let Some(s) = self.slots[i].take() {
                        s.worker.terminate();
                    }
                    self.slots[i] = self.spawn(i);
                }
            }
        }

        /// Hands `jobs[i]` to worker `i` (cancelling whatever runs). Jobs beyond the pool size
        /// are ignored; pass exactly [`Pool::len`] or fewer.
        pub fn submit(&mut self, jobs: Vec<Job>) {
            self.cancel();
            for (i, job) in jobs.into_iter().enumerate() {
                let Ok(text) = serde_json::to_string(&job) else {
                    continue;
                };
                if let Some(Some(slot)) = self.slots.get_mut(i) {
                    if slot.ready {
                        slot.busy = true;
                        let _ = slot.worker.post_message(&JsValue::from_str(&text));
                    } else {
                        slot.queued = Some(text);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unreadable_reply_names_its_job_kind_and_the_non_finite_number() {
        // What serde_json writes for a model prediction with a NaN in it.
        let text = r#"{"Models":{"id":42,"models":{"curves":[{"kind":"batching","points":[[0.4,{"ttft_mean_s":null}]]}]}}}"#;
        let e = serde_json::from_str::<Reply>(text).unwrap_err();
        let Reply::Error { id, message } = unreadable(text, &e) else {
            panic!("not an error");
        };
        assert_eq!(
            id, 42,
            "attributed to the job, not to 0 (which nobody shows)"
        );
        assert!(message.starts_with(UNREADABLE), "{message}");
        assert!(message.contains("Models reply"), "{message}");
        assert!(message.contains("NaN or infinity"), "{message}");
    }

    #[test]
    fn garbage_is_still_an_error_of_job_zero() {
        let e = serde_json::from_str::<Reply>("not json").unwrap_err();
        let Reply::Error { id, message } = unreadable("not json", &e) else {
            panic!("not an error");
        };
        assert_eq!(id, 0);
        assert!(message.contains("unknown reply") && !message.contains("NaN"));
    }
}

#[cfg(test)]
mod k_too_small {
    use crate::job::{model_rates, run, Job, Task};
    use crate::params::Params;

    /// With K = 10 no request fits: every reply must still read back on the page. (The
    /// batching model used to predict a NaN mean TTFT here, which serde_json writes as
    /// `null`; it now says that nothing fits, and `job::models` drops any non-finite
    /// prediction.)
    #[test]
    fn every_reply_of_a_k_too_small_job_reads_back() {
        let p = Params {
            kv_tokens: 10,
            horizon_s: 100.0,
            seeds: 2,
            ..Params::default()
        };
        let job = Job {
            id: 1,
            params: p.clone(),
            tasks: vec![
                Task::Curve { rate: 1.0 },
                Task::Detail { rate: 4.0 },
                Task::Models {
                    rates: model_rates(&p.rates, 20),
                },
            ],
        };
        let mut bad = Vec::new();
        run(&job, &mut |r| {
            let text = serde_json::to_string(&r).unwrap();
            if let Err(e) = serde_json::from_str::<crate::job::Reply>(&text) {
                bad.push(format!("{e}: {}", &text[..text.len().min(160)]));
            }
        });
        assert!(bad.is_empty(), "{bad:#?}");
    }
}
