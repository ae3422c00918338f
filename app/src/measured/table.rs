//! A CSV file as a header and rows, read with the `csv` crate (RFC 4180 quoting: a
//! quoted field may hold commas, quotes and line breaks), each row with the line it
//! starts on so that messages point into the file.

use super::check::{Place, Quantity, Rejected};
use super::MeasuredError;

/// One data row: the line it starts on (1 = the file's first line) and its fields.
pub(super) struct Row {
    pub line: usize,
    pub fields: Vec<String>,
}

pub(super) struct Table {
    /// The header line as written.
    pub header: String,
    pub cols: Vec<String>,
    pub rows: Vec<Row>,
}

/// A cell's content.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Cell {
    /// Empty, `nan` or `none`: not measured (bench-native writes empty cells for unknowns).
    Missing,
    Number(f64),
    NotNumber,
}

/// Reads a cell: surrounding white space and quotes are not part of the value.
pub(super) fn cell(s: &str) -> Cell {
    let s = s.trim().trim_matches('"').trim();
    if s.is_empty() || s.eq_ignore_ascii_case("nan") || s.eq_ignore_ascii_case("none") {
        return Cell::Missing;
    }
    match s.parse::<f64>() {
        Ok(x) => Cell::Number(x),
        Err(_) => Cell::NotNumber,
    }
}

impl Table {
    /// Reads `body`, whose first line is the file's line `skipped + 1`.
    ///
    /// # Errors
    /// [`MeasuredError::HeaderOnly`] without data rows, [`MeasuredError::BadRow`] for a
    /// row whose field count differs from the header's.
    pub fn read(body: &str, skipped: usize) -> Result<Table, MeasuredError> {
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(body.as_bytes());
        let mut header: Option<(String, Vec<String>)> = None;
        let mut rows = Vec::new();
        let first_line = body.lines().next().unwrap_or_default().to_string();
        for rec in reader.records() {
            let line = |pos: Option<&csv::Position>| pos.map_or(0, |p| p.line() as usize) + skipped;
            let rec = rec.map_err(|e| MeasuredError::BadRow {
                row: line(e.position()),
                why: e.to_string(),
            })?;
            let at = line(rec.position());
            // A line of white space only.
            if rec.len() == 1 && rec[0].is_empty() {
                continue;
            }
            let fields: Vec<String> = rec
                .iter()
                .map(|s| s.trim_matches('"').to_string())
                .collect();
            match &header {
                None => header = Some((first_line.clone(), fields)),
                Some((_, cols)) => {
                    if fields.len() != cols.len() {
                        return Err(MeasuredError::BadRow {
                            row: at,
                            why: format!("{} fields, the header has {}", fields.len(), cols.len()),
                        });
                    }
                    rows.push(Row { line: at, fields });
                }
            }
        }
        let (header, cols) = header.ok_or(MeasuredError::Empty)?;
        if rows.is_empty() {
            return Err(MeasuredError::HeaderOnly { header });
        }
        Ok(Table { header, cols, rows })
    }

    pub fn has(&self, name: &str) -> bool {
        self.cols.iter().any(|c| c == name)
    }

    /// The first column with one of these names.
    pub fn col(&self, names: &[&str]) -> Option<usize> {
        self.cols.iter().position(|c| names.contains(&c.as_str()))
    }

    pub fn need(&self, name: &'static str) -> Result<usize, MeasuredError> {
        self.col(&[name])
            .ok_or_else(|| MeasuredError::MissingColumn {
                column: name,
                header: self.header.clone(),
            })
    }

    /// The place of column `c` in `row`.
    pub fn place(&self, row: &Row, c: usize) -> Place {
        Place::Csv {
            line: row.line,
            column: self.cols[c].clone(),
        }
    }

    /// Reads the number in column `c` of `row` as a `q`: `None` when missing, and a
    /// [`Rejected`] in `out` (and `None`) when it is not a number or not a valid `q`.
    pub fn value(&self, row: &Row, c: usize, q: Quantity, out: &mut Vec<Rejected>) -> Option<f64> {
        let raw = &row.fields[c];
        match cell(raw) {
            Cell::Missing => None,
            Cell::NotNumber => {
                out.push(Rejected::new(self.place(row, c), raw, "not a number"));
                None
            }
            Cell::Number(x) => match q.why_not(x) {
                Some(why) => {
                    out.push(Rejected::new(self.place(row, c), raw, why));
                    None
                }
                None => Some(x),
            },
        }
    }

    /// Like [`Table::value`], but a missing value is rejected too.
    pub fn required(
        &self,
        row: &Row,
        c: usize,
        q: Quantity,
        out: &mut Vec<Rejected>,
    ) -> Option<f64> {
        if cell(&row.fields[c]) == Cell::Missing {
            out.push(Rejected::new(self.place(row, c), &row.fields[c], "missing"));
            return None;
        }
        self.value(row, c, q, out)
    }
}
