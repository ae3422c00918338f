//! Closed-loop users against a real server (`run --users`): U users, each sending its next
//! request a think time after the answer to its last one ends, from the engine's own
//! [`UserSource`], so the requests, their lengths and the think times are those that
//! `simulate --users` draws for the same seed (docs/model.md, Closed-loop users).
//!
//! A conversation's next turn resends the conversation so far, as a chat client does: the
//! earlier messages and the server's **own answers**, verbatim, then the new message
//! (concatenated for the completions API; as `user` and `assistant` messages for the chat
//! API). So a server's prefix cache can reuse everything but the new message. A turn whose
//! answer failed has no answer to resend: the conversation's next turn goes as a new
//! prompt of the same length.
//!
//! Every user starts at time 0. A user sends nothing after the horizon (`--duration`) or
//! once `--num-requests` have been sent. The intended send time of a request is the
//! instant its user became ready (the answer's end plus the think time): the runtime's
//! timer lag (about a millisecond) counts against the server, as a late send does in the
//! open loop.

use super::RequestCtx;
use crate::client::{Endpoint, PromptBuilder};
use engine::workload::{Request, UserSource};
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;
use tokio::sync::mpsc;

/// Closed-loop users: how many, and their mean think time [s].
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Users {
    pub count: u32,
    pub think_s: f64,
}

/// A user's conversation so far: its turns (messages and answers, alternating) and the
/// tokens they hold as the workload counts them (prompt + answer of the last turn).
#[derive(Debug, Default)]
struct Chat {
    conv: u32,
    tokens: u64,
    turns: Vec<String>,
}

/// What the users send, and how: the source, each user's chat, the prompt texts.
pub(super) struct Driver<'a> {
    pub source: UserSource<'a>,
    pub prompts: PromptBuilder,
    pub tokenize: bool,
    pub horizon_s: f64,
    pub max_requests: Option<usize>,
}

impl Driver<'_> {
    /// Sends the users' requests until the horizon or the request limit, waits for every
    /// answer, and returns how many requests were sent. Rows go where `ctx` sends them; a
    /// stop (`ctx.cancel`) ends the sending, and the requests in flight end as the open
    /// loop's do (an `unfinished` row).
    pub async fn drive(mut self, ep: &Endpoint, ctx: RequestCtx) -> usize {
        let users = self.source.users();
        let mut chats: Vec<Chat> = (0..users).map(|_| Chat::default()).collect();
        // Users ready to send, earliest first [s on the run clock] (ties: the lower user).
        let mut ready: BinaryHeap<Reverse<(Ready, usize)>> =
            (0..users).map(|u| Reverse((Ready(0.0), u))).collect();
        let (done_tx, mut done_rx) = mpsc::unbounded_channel::<(usize, Request, Option<String>)>();
        let mut cancel = ctx.cancel.clone();
        let (mut sent, mut in_flight) = (0usize, 0usize);
        loop {
            let next = ready.peek().map(|Reverse((Ready(t), _))| *t);
            if next.is_none() && in_flight == 0 {
                break;
            }
            let wake = ctx.t0 + Duration::from_secs_f64(next.unwrap_or(0.0));
            tokio::select! {
                biased;
                _ = cancel.changed() => {
                    wait_for_answers(&mut done_rx, in_flight).await;
                    break;
                }
                Some((u, r, answer)) = done_rx.recv(), if in_flight > 0 => {
                    in_flight -= 1;
                    let chat = &mut chats[u];
                    match answer {
                        Some(text) if chat.conv == r.conv && r.conv != 0 => {
                            chat.turns.push(text);
                            chat.tokens = r.total_tokens();
                        }
                        _ => *chat = Chat::default(),
                    }
                    let t = ctx.t0.elapsed().as_secs_f64() + self.source.think(u);
                    ready.push(Reverse((Ready(t), u)));
                }
                _ = tokio::time::sleep_until(wake), if next.is_some() => {
                    let Reverse((Ready(t), u)) = ready.pop().expect("just seen");
                    if t > self.horizon_s || self.max_requests.is_some_and(|m| sent >= m) {
                        continue; // this user is done
                    }
                    let Some(r) = self.source.next(u, t) else {
                        ready.clear(); // the workload has no more requests
                        continue;
                    };
                    self.extend(ep, &mut chats[u], &r).await;
                    let turns: Vec<&str> = chats[u].turns.iter().map(String::as_str).collect();
                    let req = ep.prepare(&ep.conversation_body(&turns, r.output)).keeping_text();
                    let done = done_tx.clone();
                    let ctx = ctx.clone();
                    tokio::spawn(async move {
                        let answer = ctx.request_answered(r, req).await;
                        let _ = done.send((u, r, answer));
                    });
                    sent += 1;
                    in_flight += 1;
                }
            }
        }
        sent
    }

    /// Extends `chat` with `r`'s new message, so that its turns are what to send: the
    /// conversation so far and the new message, or `r`'s own prompt alone if it begins a
    /// conversation (or goes on one whose history is gone). Lengths are sized with the
    /// server's tokenizer where it has one.
    async fn extend(&mut self, ep: &Endpoint, chat: &mut Chat, r: &Request) {
        let goes_on = r.conv != 0 && chat.conv == r.conv && (r.prompt as u64) > chat.tokens;
        if goes_on {
            let new = (r.prompt as u64 - chat.tokens) as u32;
            if self.tokenize {
                let len = self.prompts.message_len(new);
                self.prompts.calibrate(ep, [len]).await;
            }
            chat.turns.push(self.prompts.message(r.id, new));
            return;
        }
        if self.tokenize {
            let lens = self.prompts.lengths_of(r);
            self.prompts.calibrate(ep, lens).await;
        }
        *chat = Chat {
            conv: r.conv,
            tokens: 0,
            turns: vec![self.prompts.request_prompt(r)],
        };
    }
}

/// After a stop, waits for the requests in flight to end (each sends its row).
async fn wait_for_answers(
    done: &mut mpsc::UnboundedReceiver<(usize, Request, Option<String>)>,
    mut in_flight: usize,
) {
    while in_flight > 0 && done.recv().await.is_some() {
        in_flight -= 1;
    }
}

/// A ready instant, ordered (never NaN: run-clock times and finite think times).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ready(f64);

impl Eq for Ready {}

impl PartialOrd for Ready {
    fn partial_cmp(&self, other: &Ready) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ready {
    fn cmp(&self, other: &Ready) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
