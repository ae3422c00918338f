//! The trace control of the page's Workload panel (browser only): drop or choose a trace
//! file and the workload's arrivals become that trace, replayed time-scaled at each rate
//! ([`crate::params::trace`], docs/model.md, Workload). A file that is not a trace is
//! refused beside the control with its line and column; the parameters keep their value.

use crate::params::trace::{self, TraceInUse};
use crate::params::{Invalid, Params};
use leptos::prelude::*;

/// Largest trace file the page reads [bytes]: about a million requests as `validate`
/// writes them (the engine's per-run limit bounds what then runs).
pub const MAX_TRACE_BYTES: f64 = 100.0 * 1024.0 * 1024.0;

/// Reads the first of `files` as a trace: on success the parameters use it, else `msg`
/// says why.
fn take(files: web_sys::FileList, params: RwSignal<Params>, msg: RwSignal<Option<String>>) {
    let Some(f) = files.get(0) else { return };
    leptos::task::spawn_local(async move {
        let name = f.name();
        if f.size() > MAX_TRACE_BYTES {
            msg.set(Some(format!(
                "{name}: {:.0} MB, more than the page reads ({:.0} MB)",
                f.size() / 1048576.0,
                MAX_TRACE_BYTES / 1048576.0
            )));
            return;
        }
        let read = gloo_file::futures::read_as_text(&gloo_file::File::from(f)).await;
        match read.map_err(|e| format!("could not read the file ({e})")) {
            Ok(text) => match trace::load(&name, &text) {
                Ok(t) => {
                    msg.set(None);
                    params.update(|p| p.use_trace(t));
                }
                Err(e) => msg.set(Some(format!("{name}: {e}"))),
            },
            Err(e) => msg.set(Some(format!("{name}: {e}"))),
        }
    });
}

/// The control: a drop area with a file button, what the trace in use is, a button to
/// stop using it, and its error (a refused file's, or the parameters' about the trace).
pub fn trace_control(params: RwSignal<Params>, invalid: Memo<Option<Invalid>>) -> impl IntoView {
    let msg = RwSignal::new(None::<String>);
    let input = NodeRef::<leptos::html::Input>::new();
    let error = move || {
        msg.get().or_else(|| {
            invalid.with(|i| {
                i.as_ref()
                    .filter(|i| i.key == Some("trace"))
                    .map(|i| i.message.clone())
            })
        })
    };
    let in_use = move || params.with(|p| p.trace.as_ref().map(TraceInUse::describe));
    view! {
        <div class="trace-control" id="trace-drop"
            on:dragover=move |ev: web_sys::DragEvent| ev.prevent_default()
            on:drop=move |ev: web_sys::DragEvent| {
                ev.prevent_default();
                if let Some(files) = ev.data_transfer().and_then(|d| d.files()) {
                    take(files, params, msg);
                }
            }>
            <label class="filebtn">"Trace file… "
                <input type="file" id="trace-input" node_ref=input accept=".json,application/json"
                    on:change=move |_| {
                        if let Some(files) = input.get_untracked().and_then(|i| i.files()) {
                            take(files, params, msg);
                        }
                    } />
            </label>
            {move || match in_use() {
                Some(text) => view! {
                    <p class="hint" id="trace-info">{text}</p>
                    <button id="trace-remove" on:click=move |_| {
                        msg.set(None);
                        params.update(|p| p.trace = None);
                    }>"remove trace"</button>
                }.into_any(),
                None => view! {
                    <p class="hint">"or drop one here: a JSON list of requests {arrival, prompt, output}, of arrival times [s], or a workload JSON · "
                        <a href="examples/llama-server-trace.json" download>"example trace"</a></p>
                }.into_any(),
            }}
            {move || error().map(|e| view! { <p class="error field-error" data-error-for="trace" id="trace-error">{e}</p> })}
        </div>
    }
}
