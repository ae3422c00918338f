//! Where the event loop takes its arrivals from: a one-server run's request stream
//! ([`Pending`]), or the inbox a fleet's router fills ([`Inbox`]). Both give the next
//! arrival at the instant the server sees it, its *entry* (arrival + overhead).

use super::pending::Pending;
use crate::workload::Request;
use std::collections::VecDeque;

/// Arrivals in entry order, looked ahead by one.
pub(crate) trait Source {
    /// When the server sees the next known request [s] (∞ when none is known).
    fn next_t(&self) -> f64;
    fn peek(&self) -> Option<&Request>;
    fn pop(&mut self) -> Option<Request>;

    /// The next request if it enters before `t`.
    #[inline]
    fn pop_before(&mut self, t: f64) -> Option<Request> {
        if self.next_t() < t {
            self.pop()
        } else {
            None
        }
    }

    /// The next request if it enters at or before `t`.
    #[inline]
    fn pop_at_or_before(&mut self, t: f64) -> Option<Request> {
        if self.next_t() <= t {
            self.pop()
        } else {
            None
        }
    }
}

impl<I: Iterator<Item = Request>> Source for Pending<I> {
    #[inline]
    fn next_t(&self) -> f64 {
        self.next_t
    }

    #[inline]
    fn peek(&self) -> Option<&Request> {
        Pending::peek(self)
    }

    #[inline]
    fn pop(&mut self) -> Option<Request> {
        Pending::pop(self)
    }
}

/// The requests a router has sent one server and it has not yet seen, in arrival order.
#[derive(Debug)]
pub(crate) struct Inbox {
    q: VecDeque<Request>,
    overhead: f64,
    /// Front-end delay per prompt token [s] (`ServerConfig::overhead_per_token_s`).
    per_token: f64,
    /// Prompt + output tokens of the requests in the inbox.
    pub(crate) work_tokens: u64,
}

impl Inbox {
    pub(crate) fn new(overhead: f64, per_token: f64) -> Inbox {
        Inbox {
            q: VecDeque::new(),
            overhead,
            per_token,
            work_tokens: 0,
        }
    }

    pub(crate) fn push(&mut self, r: Request) {
        debug_assert!(
            self.q.back().is_none_or(|b| b.arrival <= r.arrival),
            "a router sends in arrival order"
        );
        self.work_tokens += r.total_tokens();
        self.q.push_back(r);
    }

    pub(crate) fn len(&self) -> usize {
        self.q.len()
    }

    /// When the server sees `r` [s].
    #[inline]
    pub(crate) fn entry(&self, r: &Request) -> f64 {
        r.arrival + self.overhead + self.per_token * r.prompt as f64
    }
}

impl Source for Inbox {
    #[inline]
    fn next_t(&self) -> f64 {
        self.q.front().map_or(f64::INFINITY, |r| self.entry(r))
    }

    #[inline]
    fn peek(&self) -> Option<&Request> {
        self.q.front()
    }

    #[inline]
    fn pop(&mut self) -> Option<Request> {
        let r = self.q.pop_front()?;
        self.work_tokens -= r.total_tokens();
        Some(r)
    }
}

impl Iterator for Inbox {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        Source::pop(self)
    }
}
