//! Plain text tables, in colour on a terminal.

use std::fmt::Write;

/// How a cell reads: green when all is well, yellow while it moves, red when it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Neutral.
    Plain,
    /// Healthy, done.
    Good,
    /// In progress, waiting.
    Busy,
    /// Failed, unhealthy.
    Bad,
}

impl Tone {
    fn code(self) -> Option<&'static str> {
        match self {
            Tone::Plain => None,
            Tone::Good => Some("32"),
            Tone::Busy => Some("33"),
            Tone::Bad => Some("31"),
        }
    }
}

/// One cell.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// The text.
    pub text: String,
    /// Its colour.
    pub tone: Tone,
}

impl Cell {
    /// A cell with `tone`.
    pub fn toned(text: impl Into<String>, tone: Tone) -> Cell {
        Cell {
            text: text.into(),
            tone,
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Cell {
        Cell::toned(text, Tone::Plain)
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Cell {
        Cell::toned(text, Tone::Plain)
    }
}

/// A table: a header line and rows, columns padded to their widest cell.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&str]) -> Table {
        Table {
            headers: headers.iter().map(|h| (*h).to_owned()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: Vec<Cell>) {
        self.rows.push(cells);
    }

    /// Whether it has no rows.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text; `colour` adds ANSI colours to toned cells and bolds the header.
    pub fn render(&self, colour: bool) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .headers
            .iter()
            .map(|h| Cell::toned(h.clone(), Tone::Plain))
            .collect();
        line(&mut out, &header, &widths, colour, true);
        for row in &self.rows {
            line(&mut out, row, &widths, colour, false);
        }
        out
    }
}

fn line(out: &mut String, cells: &[Cell], widths: &[usize], colour: bool, bold: bool) {
    let mut text = String::new();
    for (i, width) in widths.iter().enumerate() {
        let cell = cells.get(i);
        let content = cell.map_or("", |c| c.text.as_str());
        let last = i + 1 == widths.len();
        let pad = if last {
            0
        } else {
            width - content.chars().count() + 2
        };
        let code = if bold && colour {
            Some("1")
        } else {
            cell.and_then(|c| c.tone.code()).filter(|_| colour)
        };
        match code {
            Some(code) if !content.is_empty() => {
                let _ = write!(text, "\x1b[{code}m{content}\x1b[0m");
            }
            _ => text.push_str(content),
        }
        text.push_str(&" ".repeat(pad));
    }
    out.push_str(text.trim_end());
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_and_colour_is_only_on_request() {
        let mut table = Table::new(&["NAME", "PHASE"]);
        table.row(vec!["a-long-name".into(), Cell::toned("Succeeded", Tone::Good)]);
        table.row(vec!["b".into(), Cell::toned("Failed", Tone::Bad)]);
        assert_eq!(
            table.render(false),
            "NAME         PHASE\na-long-name  Succeeded\nb            Failed\n"
        );
        let coloured = table.render(true);
        assert!(coloured.contains("\x1b[32mSucceeded\x1b[0m"), "{coloured:?}");
        assert!(coloured.contains("\x1b[31mFailed\x1b[0m"), "{coloured:?}");
    }
}
