//! A small pool of sweep workers (browser only): spawn, hand each a job, forward replies,
//! cancel by terminating and respawning.

use crate::job::{Job, Reply};
use std::cell::RefCell;
use std::rc::Rc;
use wasm_bindgen::{closure::Closure, JsCast, JsValue};
use web_sys::{ErrorEvent, MessageEvent, Worker};

/// Where trunk puts the worker's loader (next to index.html).
pub const WORKER_URL: &str = "./worker_loader.js";

type OnReply = Rc<dyn Fn(usize, Reply)>;

struct Slot {
    worker: Worker,
    ready: bool,
    busy: bool,
    queued: Option<String>,
    _on_message: Closure<dyn FnMut(MessageEvent)>,
    _on_error: Closure<dyn FnMut(ErrorEvent)>,
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
        let on_message = Closure::<dyn FnMut(MessageEvent)>::new(move |ev: MessageEvent| {
            let text = ev.data().as_string().unwrap_or_default();
            let reply = match serde_json::from_str::<Reply>(&text) {
                Ok(r) => r,
                Err(e) => Reply::Error {
                    id: 0,
                    message: format!("bad reply from worker: {e}"),
                },
            };
            if let Some(pool) = me.upgrade() {
                let mut send = None;
                if let Ok(mut p) = pool.try_borrow_mut() {
                    if let Some(Some(slot)) = p.slots.get_mut(i) {
                        match &reply {
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
        let on_error = Closure::<dyn FnMut(ErrorEvent)>::new(move |ev: ErrorEvent| {
            on_reply(
                i,
                Reply::Error {
                    id: 0,
                    message: format!("worker failed: {}", ev.message()),
                },
            );
        });
        worker.set_onmessage(Some(on_message.as_ref().unchecked_ref()));
        worker.set_onerror(Some(on_error.as_ref().unchecked_ref()));
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
