//! `run --users`: closed-loop users against a fake server on loopback that records every
//! prompt and answers each request with a text of its own. A user never has two requests
//! at the server; a conversation's next turn resends the earlier turn's prompt and the
//! server's answer to it, verbatim, then a new message; the workload's turns are those
//! that `simulate --users` draws. Conversations without users are refused.

use crate::run_honesty::{http, read_request, sse};
use bench_native::run::{run_to_end, RunConfig, RunError, Users};
use engine::workload::{ArrivalProcess, Conversations, LengthDist, SharedTokens, Workload};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the fake server saw: each prompt with the answer it got, and the most requests it
/// ever held at once.
#[derive(Default)]
struct Seen {
    exchanges: Mutex<Vec<(String, String)>>,
    now: AtomicUsize,
    most: AtomicUsize,
}

/// A fake OpenAI server: `/v1/models` lists one model; each completion waits 30 ms, then
/// streams `max_tokens` one-word chunks that name the request (`a7 ` for the 8th).
fn start(seen: Arc<Seen>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let seen = seen.clone();
            std::thread::spawn(move || serve(s, &seen));
        }
    });
    url
}

fn serve(mut s: TcpStream, seen: &Seen) {
    let Some((head, body)) = read_request(&mut s) else {
        return;
    };
    let out = if head.starts_with("GET /v1/models") {
        let models = r#"{"object":"list","data":[{"id":"fake","object":"model"}]}"#;
        http("200 OK", "application/json", models.as_bytes())
    } else if head.starts_with("POST /v1/completions") {
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let now = seen.now.fetch_add(1, Ordering::SeqCst) + 1;
        seen.most.fetch_max(now, Ordering::SeqCst);
        std::thread::sleep(Duration::from_millis(30));
        let max_tokens = body["max_tokens"].as_u64().unwrap();
        let prompt = body["prompt"].as_str().unwrap().to_string();
        let word = {
            let mut ex = seen.exchanges.lock().unwrap();
            let word = format!("a{} ", ex.len());
            ex.push((prompt, word.repeat(max_tokens as usize)));
            word
        };
        let chunk =
            serde_json::json!({"choices": [{"text": word, "index": 0, "finish_reason": null}]});
        let mut events: Vec<String> = (0..max_tokens).map(|_| chunk.to_string()).collect();
        events.push(format!(
            r#"{{"choices":[{{"text":"","index":0,"finish_reason":"length"}}],"usage":{{"prompt_tokens":8,"completion_tokens":{max_tokens}}}}}"#
        ));
        seen.now.fetch_sub(1, Ordering::SeqCst);
        sse(&events)
    } else {
        http("404 Not Found", "text/plain", b"")
    };
    let _ = s.write_all(&out);
    let _ = s.flush();
}

fn chats() -> Workload {
    Workload {
        arrivals: ArrivalProcess::Poisson { rate: 1.0 },
        lengths: LengthDist::Fixed {
            prompt: 12,
            output: 4,
        },
        max_model_len: Some(4096),
        shared: Some(SharedTokens::Conversations {
            conversations: Conversations {
                mean_turns: 4.0,
                max_turns: 6,
                think_s: 1.0,
            },
            system: None,
        }),
    }
}

fn config(url: &str, name: &str) -> RunConfig {
    let dir =
        crate::common::scratch_root().join(format!("kvqueue-users-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cfg = RunConfig::new(url, dir);
    cfg.workload = chats();
    cfg.warmup_requests = 0;
    cfg.metrics_interval = None;
    cfg.use_tokenizer = false;
    cfg.horizon_s = 1.5;
    cfg.max_requests = Some(40);
    cfg
}

#[test]
fn users_resend_their_conversations_and_never_overlap() {
    let _cpu = crate::common::cpu_bound();
    let seen = Arc::new(Seen::default());
    let url = start(seen.clone());
    let mut cfg = config(&url, "chats");
    cfg.users = Some(Users {
        count: 3,
        think_s: 0.01,
    });
    let rt = bench_native::run::runtime().unwrap();
    let rep = run_to_end(&rt, &cfg).unwrap();
    let ex = seen.exchanges.lock().unwrap().clone();
    assert_eq!(rep.rows.len(), ex.len(), "a row per request sent");
    assert_eq!(rep.scheduled, ex.len());
    assert_eq!(rep.summary.completed, ex.len() as u64, "{:#?}", rep.rows);
    assert!(ex.len() >= 12, "{} requests in 1.5 s", ex.len());
    assert!(ex.len() <= 40, "--num-requests caps the run");
    let most = seen.most.load(Ordering::SeqCst);
    assert!(most <= 3, "{most} requests at once from 3 users");
    // Every later turn begins with an earlier exchange, prompt and answer verbatim, and
    // adds a message of its own; its prompt is as long as the workload's turn says.
    let mut turns = 0;
    for (j, (prompt, _)) in ex.iter().enumerate() {
        let before = ex[..j]
            .iter()
            .filter(|(p, a)| prompt.starts_with(&format!("{p}{a}")))
            .max_by_key(|(p, _)| p.len());
        if let Some((p, a)) = before {
            turns += 1;
            assert!(prompt.len() > p.len() + a.len(), "a new message follows");
        }
    }
    assert!(
        turns >= ex.len() / 3,
        "{turns} of {} requests go on a conversation",
        ex.len()
    );
    // The rows' target lengths are the workload's turns: 12 tokens of new message per
    // turn, 4 of answer, so a turn's prompt is 12 + 16·k tokens.
    for r in &rep.rows {
        assert_eq!(r.target_output_tokens, 4);
        assert_eq!((r.target_prompt_tokens - 12) % 16, 0, "{r:?}");
    }
    assert!(rep.rows.iter().any(|r| r.target_prompt_tokens > 12));
}

#[test]
fn conversations_need_users() {
    let seen = Arc::new(Seen::default());
    let url = start(seen.clone());
    let rt = bench_native::run::runtime().unwrap();
    let err = run_to_end(&rt, &config(&url, "open")).unwrap_err();
    assert!(
        matches!(&err, RunError::Invalid(m) if m.contains("--users")),
        "{err}"
    );
    assert_eq!(seen.exchanges.lock().unwrap().len(), 0, "nothing sent");
    let out = crate::common::bin()
        .args(["run", "--url", &url, "--conversations", "4:8:1"])
        .output()
        .unwrap();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && e.contains("--users"), "{e}");
}
