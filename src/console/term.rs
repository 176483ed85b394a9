//! What the terminal can show, from `TERM`, `COLORTERM` and the locale (a bastion's `vt100`,
//! the Linux console, a non-UTF-8 locale): how many colours, and whether box drawing and other
//! non-ASCII symbols can be drawn. Overridable (`--colors`, `--glyphs`). Every frame is drawn
//! as usual and then brought within these limits, so no view needs to know them; and on a
//! 16-colour terminal the output says colours as such terminals read them ([`Out`]: crossterm
//! writes even the 16 basic colours as 256-colour `38;5;N`).

use ratatui::buffer::Buffer;
use ratatui::style::Color;

/// How many colours the terminal shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Depth {
    /// None: styles only (bold, reverse).
    None,
    /// The 16 ANSI colours.
    Ansi16,
    /// 256 indexed colours.
    Ansi256,
    /// 24-bit colour.
    TrueColor,
}

/// What the terminal can show.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caps {
    /// Colours.
    pub depth: Depth,
    /// Only ASCII: box drawing, arrows and marks become `+-|><`.
    pub ascii: bool,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            depth: Depth::TrueColor,
            ascii: false,
        }
    }
}

/// Why a `--colors` or `--glyphs` value is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CapsError(String);

impl Caps {
    /// From the environment, unless `colors` (`none`, `16`, `256`, `truecolor`, `auto`) or
    /// `glyphs` (`ascii`, `unicode`, `auto`) say otherwise.
    pub fn detect(colors: Option<&str>, glyphs: Option<&str>) -> Result<Caps, CapsError> {
        let var = |k: &str| std::env::var(k).unwrap_or_default();
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .map(|k| var(k))
            .find(|v| !v.is_empty())
            .unwrap_or_default();
        let mut caps = Caps::from_env(&var("TERM"), &var("COLORTERM"), &locale);
        match colors.unwrap_or("auto") {
            "auto" => {}
            "none" | "0" => caps.depth = Depth::None,
            "16" => caps.depth = Depth::Ansi16,
            "256" => caps.depth = Depth::Ansi256,
            "truecolor" | "24bit" => caps.depth = Depth::TrueColor,
            other => {
                return Err(CapsError(format!(
                    "--colors {other}: say auto, none, 16, 256 or truecolor"
                )));
            }
        }
        match glyphs.unwrap_or("auto") {
            "auto" => {}
            "ascii" => caps.ascii = true,
            "unicode" | "utf8" | "utf-8" => caps.ascii = false,
            other => {
                return Err(CapsError(format!(
                    "--glyphs {other}: say auto, ascii or unicode"
                )));
            }
        }
        Ok(caps)
    }

    /// What `TERM`, `COLORTERM` and the locale say.
    pub fn from_env(term: &str, colorterm: &str, locale: &str) -> Caps {
        let term = term.to_ascii_lowercase();
        let old = term.starts_with("vt") || term == "linux" || term == "ansi" || term == "cons25";
        let depth = if term == "dumb" {
            Depth::None
        } else if matches!(
            colorterm.to_ascii_lowercase().as_str(),
            "truecolor" | "24bit"
        ) && !old
        {
            Depth::TrueColor
        } else if term.contains("256color") || term.contains("direct") {
            Depth::Ansi256
        } else {
            Depth::Ansi16
        };
        let locale = locale.to_ascii_lowercase();
        let utf8 = locale.contains("utf-8") || locale.contains("utf8");
        Caps {
            depth,
            ascii: old || term == "dumb" || !utf8,
        }
    }

    /// Brings a drawn frame within what the terminal shows.
    pub fn apply(&self, buf: &mut Buffer) {
        if self.depth == Depth::TrueColor && !self.ascii {
            return;
        }
        if self.ascii {
            for y in 0..buf.area.height {
                widen_row(buf, y);
            }
        }
        for cell in buf.content.iter_mut() {
            if self.ascii {
                let sym = cell.symbol();
                if !sym.is_ascii() {
                    let a = ascii(sym);
                    cell.set_symbol(a);
                }
            }
            cell.fg = self.color(cell.fg);
            cell.bg = self.color(cell.bg);
        }
    }

    fn color(&self, c: Color) -> Color {
        match (self.depth, c) {
            (Depth::TrueColor, c) => c,
            (Depth::None, _) => Color::Reset,
            (Depth::Ansi256, Color::Rgb(r, g, b)) => Color::Indexed(to_256(r, g, b)),
            (Depth::Ansi256, c) => c,
            (Depth::Ansi16, Color::Rgb(r, g, b)) => nearest16(r, g, b),
            (Depth::Ansi16, Color::Indexed(i)) => {
                let (r, g, b) = from_256(i);
                nearest16(r, g, b)
            }
            (Depth::Ansi16, c) => c,
        }
    }
}

/// The console's output: the terminal, with every `38;5;N`/`48;5;N` of a basic colour (N < 16)
/// rewritten as the 16-colour SGR (`31`, `97`, `44`, `100`) where the terminal has 16 colours.
/// Writes are held until a flush (ratatui flushes each frame), so no sequence is cut in two.
#[derive(Debug)]
pub struct Out<W: std::io::Write> {
    inner: W,
    sgr16: bool,
    held: Vec<u8>,
}

impl<W: std::io::Write> Out<W> {
    /// `inner`, rewritten when `caps` has 16 colours or none.
    pub fn new(inner: W, caps: Caps) -> Self {
        Out {
            inner,
            sgr16: matches!(caps.depth, Depth::Ansi16 | Depth::None),
            held: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for Out<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if !self.sgr16 {
            return self.inner.write(buf);
        }
        self.held.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.held.is_empty() {
            let out = sgr16(&self.held);
            self.held.clear();
            self.inner.write_all(&out)?;
        }
        self.inner.flush()
    }
}

/// `bytes` with every SGR's 256-colour basic colours said as 16-colour parameters.
pub fn sgr16(bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == 0x1b && bytes.get(i + 1) == Some(&b'[') {
            // A CSI: parameters (digits and ';') up to its final byte.
            let start = i + 2;
            let mut end = start;
            while end < bytes.len() && (bytes[end].is_ascii_digit() || bytes[end] == b';') {
                end += 1;
            }
            if bytes.get(end) == Some(&b'm') {
                let params = std::str::from_utf8(&bytes[start..end]).unwrap_or_default();
                out.extend_from_slice(b"\x1b[");
                out.extend_from_slice(rewrite(params).as_bytes());
                out.push(b'm');
                i = end + 1;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

fn rewrite(params: &str) -> String {
    let p: Vec<&str> = params.split(';').collect();
    let mut out: Vec<String> = Vec::new();
    let mut k = 0;
    while k < p.len() {
        let basic = p
            .get(k + 2)
            .and_then(|n| n.parse::<u8>().ok())
            .filter(|n| *n < 16);
        match (p[k], p.get(k + 1), basic) {
            ("38", Some(&"5"), Some(n)) => {
                out.push(
                    if n < 8 {
                        30 + u16::from(n)
                    } else {
                        82 + u16::from(n)
                    }
                    .to_string(),
                );
                k += 3;
            }
            ("48", Some(&"5"), Some(n)) => {
                out.push(
                    if n < 8 {
                        40 + u16::from(n)
                    } else {
                        92 + u16::from(n)
                    }
                    .to_string(),
                );
                k += 3;
            }
            (x, _, _) => {
                out.push(x.to_owned());
                k += 1;
            }
        }
    }
    out.join(";")
}

/// The two-cell ASCII form of a symbol whose one-cell stand-in would change what it says
/// (`→` is `->`, not `>`; `≤ 2%` is `<= 2%`, not `< 2%`).
fn wide_ascii(sym: &str) -> Option<[&'static str; 2]> {
    match sym {
        "→" => Some(["-", ">"]),
        "←" => Some(["<", "-"]),
        "≤" => Some(["<", "="]),
        "≥" => Some([">", "="]),
        _ => None,
    }
}

/// Writes row `y`'s two-cell symbols in ASCII: the cells after one move right by one into the
/// first run of two spaces after it (a table's padding, a line's end), so what follows keeps
/// its place beyond that and a panel's border stays where it is.
fn widen_row(buf: &mut Buffer, y: u16) {
    let w = usize::from(buf.area.width);
    let start = usize::from(y) * w;
    let mut x = 0;
    while x + 1 < w {
        let Some([a, b]) = wide_ascii(buf.content[start + x].symbol()) else {
            x += 1;
            continue;
        };
        let gap = gap_after(buf, start, x, w);
        for k in (x + 1..gap).rev() {
            buf.content[start + k + 1] = buf.content[start + k].clone();
        }
        let mut second = buf.content[start + x].clone();
        second.set_symbol(b);
        buf.content[start + x + 1] = second;
        buf.content[start + x].set_symbol(a);
        x += 2;
    }
}

/// The cell after `x` that a widened symbol's row gives up: the first of two spaces or of two
/// dashes of a border's rule, or the cell just before a vertical border (a dialog's text that reaches its border loses a
/// character rather than push the border), or the row's last.
fn gap_after(buf: &Buffer, start: usize, x: usize, w: usize) -> usize {
    let sym = |j: usize| buf.content[start + j].symbol();
    let border = |j: usize| matches!(sym(j), "│" | "┃" | "║" | "|");
    for j in x + 1..w {
        if border(j) {
            return j.saturating_sub(1).max(x + 1);
        }
        if sym(j) == " " && (j + 1 == w || sym(j + 1) == " " || border(j + 1)) {
            return j;
        }
        // A title in a top border: the rule after it is one dash shorter.
        let rule = |j: usize| matches!(sym(j), "─" | "━" | "═");
        if rule(j) && j + 1 < w && rule(j + 1) {
            return j;
        }
    }
    w - 1
}

/// An ASCII stand-in for a symbol.
fn ascii(sym: &str) -> &'static str {
    match sym {
        "─" | "━" | "═" | "–" | "—" => "-",
        "│" | "┃" | "║" => "|",
        "┌" | "┐" | "└" | "┘" | "├" | "┤" | "┬" | "┴" | "┼" | "╭" | "╮" | "╰" | "╯" | "┏" | "┓"
        | "┗" | "┛" => "+",
        "█" | "▓" | "▒" => "#",
        "░" => ".",
        // A sparkline's levels, lowest first.
        "▁" | "▂" => "_",
        "▃" => ".",
        "▄" | "▅" => "-",
        "▆" | "▇" => "=",
        "›" | "→" | "≥" | "»" | "▶" => ">",
        "‹" | "←" | "≤" | "«" => "<",
        "↑" => "^",
        "↓" => "v",
        "…" => "~",
        "·" | "•" => "*",
        "✗" | "×" => "x",
        "✓" => "v",
        "⚠" => "!",
        "“" | "”" | "„" => "\"",
        "‘" | "’" => "'",
        _ => "?",
    }
}

const BASE16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

fn nearest16(r: u8, g: u8, b: u8) -> Color {
    let d = |(x, y, z): (u8, u8, u8)| {
        let dr = i32::from(r) - i32::from(x);
        let dg = i32::from(g) - i32::from(y);
        let db = i32::from(b) - i32::from(z);
        dr * dr + dg * dg + db * db
    };
    BASE16
        .iter()
        .min_by_key(|(_, rgb)| d(*rgb))
        .map_or(Color::Reset, |(c, _)| *c)
}

fn to_256(r: u8, g: u8, b: u8) -> u8 {
    let q = |v: u8| (u16::from(v) * 5 + 127) / 255;
    let i = 16 + 36 * q(r) + 6 * q(g) + q(b);
    u8::try_from(i).unwrap_or(231)
}

fn from_256(i: u8) -> (u8, u8, u8) {
    match i {
        0..16 => BASE16[usize::from(i)].1,
        16..232 => {
            let i = i - 16;
            let s = |v: u8| if v == 0 { 0 } else { 55 + v * 40 };
            (s(i / 36), s((i / 6) % 6), s(i % 6))
        }
        _ => {
            let v = 8 + (i - 232) * 10;
            (v, v, v)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_keeps_what_arrows_and_bounds_say_and_borders_in_place() {
        use ratatui::layout::Rect;
        let mut buf = Buffer::empty(Rect::new(0, 0, 24, 2));
        buf.set_string(
            0,
            0,
            "│a 10% → 15%    x  │",
            ratatui::style::Style::default(),
        );
        buf.set_string(
            0,
            1,
            "│≤ 2% ▁▃▅▇█ ←       │",
            ratatui::style::Style::default(),
        );
        let caps = Caps {
            depth: Depth::Ansi16,
            ascii: true,
        };
        caps.apply(&mut buf);
        let row = |y: u16| -> String {
            (0..buf.area.width)
                .map(|x| buf[(x, y)].symbol().to_owned())
                .collect()
        };
        assert_eq!(row(0), "|a 10% -> 15%   x  |    ");
        assert_eq!(row(1), "|<= 2% _.-=# <-     |   ");
    }

    #[test]
    fn old_terminals_and_non_utf8_locales_get_16_colours_and_ascii() {
        let vt = Caps::from_env("vt100", "", "en_US.UTF-8");
        assert_eq!((vt.depth, vt.ascii), (Depth::Ansi16, true));
        let linux = Caps::from_env("linux", "truecolor", "C.UTF-8");
        assert_eq!((linux.depth, linux.ascii), (Depth::Ansi16, true));
        let c = Caps::from_env("xterm-256color", "", "C");
        assert_eq!((c.depth, c.ascii), (Depth::Ansi256, true), "the C locale");
        let modern = Caps::from_env("xterm-256color", "truecolor", "en_GB.utf8");
        assert_eq!((modern.depth, modern.ascii), (Depth::TrueColor, false));
        assert_eq!(Caps::from_env("dumb", "", "").depth, Depth::None);
    }

    #[test]
    fn frames_are_brought_within_the_terminal() {
        let mut buf = Buffer::empty(ratatui::layout::Rect::new(0, 0, 4, 1));
        buf[(0, 0)]
            .set_symbol("┌")
            .set_fg(Color::Rgb(0x1f, 0x24, 0x30));
        buf[(1, 0)].set_symbol("█").set_bg(Color::Indexed(196));
        buf[(2, 0)].set_symbol("›").set_fg(Color::Yellow);
        Caps {
            depth: Depth::Ansi16,
            ascii: true,
        }
        .apply(&mut buf);
        assert_eq!(buf[(0, 0)].symbol(), "+");
        assert_eq!(buf[(0, 0)].fg, Color::Black);
        assert_eq!(buf[(1, 0)].symbol(), "#");
        assert_eq!(buf[(1, 0)].bg, Color::LightRed);
        assert_eq!((buf[(2, 0)].symbol(), buf[(2, 0)].fg), (">", Color::Yellow));
        assert!(Caps::detect(Some("12"), None).is_err());
    }

    #[test]
    fn sixteen_colour_terminals_are_told_colours_as_they_read_them() {
        let out = sgr16(b"a\x1b[38;5;15mb\x1b[1;48;5;9;38;5;2mc\x1b[39m\x1b[38;5;200md\x1b[2J");
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "a\x1b[97mb\x1b[1;101;32mc\x1b[39m\x1b[38;5;200md\x1b[2J"
        );
        let mut o = Out::new(
            Vec::new(),
            Caps {
                depth: Depth::Ansi16,
                ascii: true,
            },
        );
        use std::io::Write;
        o.write_all(b"\x1b[38;").unwrap();
        o.write_all(b"5;1mx").unwrap();
        o.flush().unwrap();
        assert_eq!(o.inner, b"\x1b[31mx", "a sequence cut across writes");
    }
}
