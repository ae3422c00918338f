//! The request stream as the event loop reads it: the next arrival looked ahead, with the
//! instant the server sees it (arrival + per-request overhead) kept as a plain number.

use crate::workload::Request;

/// The request stream with its next arrival looked ahead (what `Peekable::next_if` does,
/// with the next entry time kept as a plain f64 — infinite when the stream is over).
pub(super) struct Pending<I> {
    it: I,
    next: Option<Request>,
    /// When the server sees the next request: its arrival + the front-end delay
    /// (`ServerConfig::entry_delay`) [s].
    pub(super) next_t: f64,
    overhead: f64,
    /// Front-end delay per prompt token [s] (`ServerConfig::overhead_per_token_s`).
    per_token: f64,
}

impl<I: Iterator<Item = Request>> Pending<I> {
    pub(super) fn new(mut it: I, overhead: f64, per_token: f64) -> Self {
        let next = it.next();
        Pending {
            next_t: next.map_or(f64::INFINITY, |r| {
                r.arrival + overhead + per_token * r.prompt as f64
            }),
            next,
            it,
            overhead,
            per_token,
        }
    }

    pub(super) fn peek(&self) -> Option<&Request> {
        self.next.as_ref()
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Request> {
        let r = self.next.take();
        self.next = self.it.next();
        self.next_t = self.next.map_or(f64::INFINITY, |r| {
            r.arrival + self.overhead + self.per_token * r.prompt as f64
        });
        r
    }
}

impl<I: Iterator<Item = Request>> Iterator for Pending<I> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        self.next.is_some().then(|| self.pop()).flatten()
    }
}
