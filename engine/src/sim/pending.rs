//! The request stream as the event loop reads it: the next arrival looked ahead, with the
//! instant the server sees it (arrival + per-request overhead) kept as a plain number.

use crate::workload::Request;

/// The request stream with its next arrival looked ahead (what `Peekable::next_if` does,
/// with the next entry time kept as a plain f64 — infinite when the stream is over).
pub(super) struct Pending<I> {
    it: I,
    next: Option<Request>,
    /// When the server sees the next request: its arrival + `overhead` [s].
    pub(super) next_t: f64,
    overhead: f64,
}

impl<I: Iterator<Item = Request>> Pending<I> {
    pub(super) fn new(mut it: I, overhead: f64) -> Self {
        let next = it.next();
        Pending {
            next_t: next.map_or(f64::INFINITY, |r| r.arrival + overhead),
            next,
            it,
            overhead,
        }
    }

    pub(super) fn peek(&self) -> Option<&Request> {
        self.next.as_ref()
    }

    #[inline]
    pub(super) fn pop(&mut self) -> Option<Request> {
        let r = self.next.take();
        self.next = self.it.next();
        self.next_t = self
            .next
            .map_or(f64::INFINITY, |r| r.arrival + self.overhead);
        r
    }
}

impl<I: Iterator<Item = Request>> Iterator for Pending<I> {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        self.next.is_some().then(|| self.pop()).flatten()
    }
}
