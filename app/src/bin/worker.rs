//! The sweep worker, started by the page as a classic-script `Worker`. It announces [`Reply::Ready`],
//! then runs each [`Job`] it receives (as a JSON string) and posts every reply back as
//! JSON. Cancelling is done by the page terminating the worker.
//!
//! After its first job the worker runs [`app::job::warm_up_job`] once (replies dropped),
//! so the grid's hot code is optimised before the page's first grid run.

#[cfg(target_arch = "wasm32")]
fn main() {
    use app::job::{run, warm_up_job, Job, Reply};
    use gloo_events::EventListener;
    use std::cell::Cell;
    use wasm_bindgen::{JsCast, JsValue};
    use web_sys::{DedicatedWorkerGlobalScope, MessageEvent};

    let scope: DedicatedWorkerGlobalScope = js_sys::global().unchecked_into();
    let post = {
        let scope = scope.clone();
        move |r: &Reply| {
            if let Ok(s) = serde_json::to_string(r) {
                let _ = scope.post_message(&JsValue::from_str(&s));
            }
        }
    };
    let post2 = post.clone();
    let warmed = Cell::new(false);
    let on_message = EventListener::new(&scope, "message", move |ev| {
        let text = ev
            .unchecked_ref::<MessageEvent>()
            .data()
            .as_string()
            .unwrap_or_default();
        match serde_json::from_str::<Job>(&text) {
            Ok(job) => run(&job, &mut |r| post2(&r)),
            Err(e) => post2(&Reply::Error {
                id: 0,
                message: format!("bad job: {e}"),
            }),
        }
        // The page has its replies (this job's Done included); a message that arrives
        // meanwhile waits the few milliseconds this takes.
        if !warmed.replace(true) {
            run(&warm_up_job(), &mut |r| {
                // Serialised as a real reply is, then dropped.
                let _ = serde_json::to_string(&r);
            });
        }
    });
    // The worker listens for as long as it lives.
    on_message.forget();
    post(&Reply::Ready);
}

#[cfg(not(target_arch = "wasm32"))]
fn main() {
    eprintln!("the sweep worker runs in a browser; build it with `node app/build.mjs`");
}
