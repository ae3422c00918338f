//! Incremental Server-Sent-Events parser: bytes in (as they arrive from the socket), the
//! `data:` payloads of complete lines out. OpenAI-compatible servers send one JSON object
//! per `data:` line and end with `data: [DONE]`.

/// Splits a byte stream into `data:` payloads. Partial lines are kept until completed.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds `bytes`; calls `on_data` for each complete `data:` line, in order.
    pub fn push(&mut self, bytes: &[u8], mut on_data: impl FnMut(&str)) {
        self.buf.extend_from_slice(bytes);
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|&b| b == b'\n') {
            let line = &self.buf[start..start + pos];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if let Some(rest) = line.strip_prefix(b"data:") {
                let rest = rest.strip_prefix(b" ").unwrap_or(rest);
                on_data(&String::from_utf8_lossy(rest));
            }
            start += pos + 1;
        }
        self.buf.drain(..start);
    }

    /// Bytes of an incomplete trailing line.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
