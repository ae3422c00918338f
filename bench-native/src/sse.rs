//! Incremental Server-Sent-Events parser: bytes in (as they arrive from the socket), the
//! `data:` payloads of complete lines out. OpenAI-compatible servers send one JSON object
//! per `data:` line and end with `data: [DONE]`.

/// Splits a byte stream into `data:` payloads. Partial lines are kept until completed.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
    /// Leading bytes of `buf` already searched for a newline (none there), so a long line
    /// arriving in many small chunks is scanned once, not once per chunk.
    scanned: usize,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds `bytes`; calls `on_data` for each complete `data:` line, in order.
    pub fn push(&mut self, bytes: &[u8], mut on_data: impl FnMut(&str)) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        let mut from = self.scanned;
        while let Some(pos) = self.buf[from..].iter().position(|&b| b == b'\n') {
            let end = from + pos;
            let line = &self.buf[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(rest) = line.strip_prefix(b"data:") {
                let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                on_data(&String::from_utf8_lossy(rest));
            }
            start = end + 1;
            from = start;
        }
        self.buf.drain(..start);
        self.scanned = self.buf.len();
    }

    /// Bytes of an incomplete trailing line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

/// Cases per property test: `PROPTEST_CASES` if set (a longer search), else 1,000.
#[cfg(test)]
pub(crate) fn proptest_cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_across_chunks() {
        let mut p = SseParser::new();
        let mut out = Vec::new();
        p.push(b"data: {\"a\":1}\n\nda", |d| out.push(d.to_string()));
        p.push(b"ta: {\"b\":2}\r\n\r\n: comment\ndata: [DONE]\n\n", |d| {
            out.push(d.to_string())
        });
        assert_eq!(out, vec!["{\"a\":1}", "{\"b\":2}", "[DONE]"]);
        assert_eq!(p.pending(), 0);
    }

    /// Every payload of `bytes` fed in pieces cut at `cuts` (positions, any order).
    fn payloads(bytes: &[u8], cuts: &[usize]) -> (Vec<String>, usize) {
        let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
        at.push(0);
        at.push(bytes.len());
        at.sort_unstable();
        let mut p = SseParser::new();
        let mut out = Vec::new();
        for w in at.windows(2) {
            p.push(&bytes[w[0]..w[1]], |d| out.push(d.to_string()));
        }
        (out, p.pending())
    }

    /// A line made of SSE-looking pieces, so that `data:` prefixes, CRs and newlines are
    /// common in the generated input (arbitrary bytes alone rarely contain them).
    fn sse_bytes() -> impl Strategy<Value = Vec<u8>> {
        let piece = prop_oneof![
            Just(b"data:".to_vec()),
            Just(b"data: ".to_vec()),
            Just(b"\n".to_vec()),
            Just(b"\r\n".to_vec()),
            Just(b"\r".to_vec()),
            Just(b": comment".to_vec()),
            Just(b"[DONE]".to_vec()),
            Just("é€😀".as_bytes().to_vec()),
            proptest::collection::vec(any::<u8>(), 0..12),
        ];
        proptest::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(proptest_cases()))]

        /// Arbitrary bytes cut at arbitrary points: no panic, and the same payloads (and
        /// the same pending tail) as when fed whole.
        #[test]
        fn chunking_never_changes_the_payloads(
            bytes in prop_oneof![sse_bytes(), proptest::collection::vec(any::<u8>(), 0..300)],
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
        ) {
            let whole = payloads(&bytes, &[]);
            prop_assert_eq!(payloads(&bytes, &cuts), whole.clone());
            // one byte at a time
            let every: Vec<usize> = (0..bytes.len()).collect();
            prop_assert_eq!(payloads(&bytes, &every), whole);
        }

        /// Well-formed `data:` lines come out exactly as written, whatever the line ends
        /// and however the stream is cut.
        #[test]
        fn well_formed_lines_come_out_as_written(
            lines in proptest::collection::vec("[^\r\n]{0,40}", 0..20),
            crlf in any::<bool>(),
            cuts in proptest::collection::vec(any::<usize>(), 0..20),
        ) {
            let end = if crlf { "\r\n" } else { "\n" };
            let text: String = lines.iter().map(|l| format!("data: {l}{end}{end}")).collect();
            let (out, pending) = payloads(text.as_bytes(), &cuts);
            prop_assert_eq!(out, lines);
            prop_assert_eq!(pending, 0);
        }
    }
}
