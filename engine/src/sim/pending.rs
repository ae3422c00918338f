//! The request stream as the event loop reads it: the next arrival looked ahead, with the
//! instant the server sees it (arrival + front-end delay) kept as a plain number.

use crate::config::ServerConfig;
use crate::workload::Request;

/// The request stream with its next arrival looked ahead (what `Peekable::next_if` does,
/// with the next entry time kept as a plain f64 — infinite when the stream is over).
pub(super) struct Pending<I> {
    it: I,
    next: Option<Request>,
    /// When the server sees the next request: its arrival + front-end delay, and with a
    /// per-token delay not before the request ahead of it (the front end hands requests
    /// on in arrival order) [s].
    pub(super) next_t: f64,
    /// When the server saw the request [`Pending::pop`] returned last [s].
    pub(super) entry: f64,
    /// Front-end delay per request [s] (`ServerConfig::overhead_s`).
    overhead: f64,
    /// Front-end delay per prompt token [s] (`ServerConfig::overhead_per_token_s`).
    per_token: f64,
}

impl<I: Iterator<Item = Request>> Pending<I> {
    pub(super) fn new(mut it: I, server: &ServerConfig) -> Self {
        let next = it.next();
        let mut p = Pending {
            next_t: f64::INFINITY,
            entry: f64::NEG_INFINITY,
            next,
            it,
            overhead: server.overhead_s,
            per_token: server.overhead_per_token_s,
        };
        p.next_t = p.entry_of_next();
        p
    }

    /// The entry instant of the looked-ahead request (infinite when the stream is over).
    #[inline]
    fn entry_of_next(&self) -> f64 {
        match self.next {
            None => f64::INFINITY,
            // Without a per-token delay the order of entries is that of arrivals.
            Some(r) if self.per_token == 0.0 => r.arrival + self.overhead,
            Some(r) => {
                let own = r.arrival + self.overhead + self.per_token * r.prompt as f64;
                if own < self.entry {
                    self.entry
                } else {
                    own
                }
            }
        }
    }

    pub(super) fn peek(&self) -> Option<&Request> {
        self.next.as_ref()
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Request> {
        let r = self.next.take();
        self.entry = self.next_t;
        self.next = self.it.next();
        self.next_t = self.entry_of_next();
        r
    }

    /// The next request if it arrives before `t`.
    #[inline]
    pub(super) fn pop_before(&mut self, t: f64) -> Option<Request> {
        if self.next_t < t {
            self.pop()
        } else {
            None
        }
    }

    /// The next request if it arrives at or before `t`.
    #[inline]
    pub(super) fn pop_at_or_before(&mut self, t: f64) -> Option<Request> {
        if self.next_t <= t {
            self.pop()
        } else {
            None
        }
    }
}

impl<I: Iterator<Item = Request>> Iterator for Pending<I> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        self.next.is_some().then(|| self.pop()).flatten()
    }
}
