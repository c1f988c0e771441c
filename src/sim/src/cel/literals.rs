//! String and bytes literals decoded as cel-go decodes them
//! (`parser/unescape.go`), and handed to cel-rust's parser as placeholders it
//! reads correctly.
//!
//! Why: cel-rust 0.13 decodes raw, triple-quoted and bytes literals and some
//! escapes differently from cel-go (`r"""a\" b"""`, `b"""x"""`, `'\X41'`,
//! `"\'"`), refuses others (`"""say "hi" """`), and its generated lexer loses a
//! raw triple-quoted literal that contains NUL or U+10FFFF (antlr4rust's
//! wildcard excludes both), then recovers with one error per following
//! character (a 3 KiB selector took 15 s and 0.7 GiB: the `cel` fuzz target).
//! [`super::lexer`] already finds every literal exactly as cel-go's lexer
//! does, so each literal that is not a plain quoted string is decoded here and
//! replaced, for cel-rust, by a plain literal holding a unique tag, of the
//! same length wherever the tag fits (so error positions stay right);
//! [`Literals::restore`] puts the decoded values back into the parsed tree.
//! Hexadecimal ints are rewritten as decimal ones for the same reason
//! (cel-rust refuses `-0x1F`).

use std::collections::{HashMap, HashSet};

use kube_cel::cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};

use super::lexer::{Tok, Token};

/// A literal's value, as cel-go's parser stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decoded {
    String(String),
    Bytes(Vec<u8>),
}

/// A literal cel-go's parser refuses although its lexer accepted it: a code
/// point that is no Unicode scalar value, or a `\u` escape in bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LiteralError {
    /// Byte offset of the literal in the expression.
    pub(crate) offset: usize,
    /// cel-go's message.
    pub(crate) message: &'static str,
}

/// cel-go's message for an escape that cannot be decoded.
const UNABLE: &str = "unable to unescape string";
/// cel-go's message for an escape naming a surrogate or a value past U+10FFFF.
const INVALID_CODE_POINT: &str = "invalid unicode code point";

/// Decodes the source text of one string or bytes literal token (with its
/// `b`/`r` prefixes and quotes) as cel-go's `unescape` does. Escapes the
/// grammar does not define never get here: [`super::lexer`] refuses them.
pub(crate) fn decode(token: &str) -> Result<Decoded, &'static str> {
    let (is_bytes, text) = match token.as_bytes().first() {
        Some(b'b' | b'B') => (true, &token[1..]),
        _ => (false, token),
    };
    // Every literal's line endings read as `\n`, raw or not.
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let (raw, quoted) = match text.as_bytes().first() {
        Some(b'r' | b'R') => (true, &text[1..]),
        _ => (false, text.as_str()),
    };
    let quote = quoted.as_bytes().first().copied().ok_or(UNABLE)?;
    if !matches!(quote, b'"' | b'\'') || quoted.len() < 2 || !quoted.ends_with(quote as char) {
        return Err(UNABLE);
    }
    let triple = [quote; 3];
    let body = if quoted.len() >= 6 && quoted.as_bytes().starts_with(&triple) {
        quoted.get(3..quoted.len() - 3).ok_or(UNABLE)?
    } else {
        &quoted[1..quoted.len() - 1]
    };
    let value = if raw || !body.contains('\\') {
        body.as_bytes().to_vec()
    } else {
        unescape(body, is_bytes)?
    };
    Ok(if is_bytes {
        Decoded::Bytes(value)
    } else {
        // Only whole UTF-8 sequences and encoded scalar values were pushed.
        Decoded::String(String::from_utf8(value).map_err(|_| INVALID_CODE_POINT)?)
    })
}

/// The escape sequences of `body`, decoded; in bytes, `\x` and octal escapes
/// are byte values and `\u`/`\U` are refused, in strings all are code points.
fn unescape(body: &str, is_bytes: bool) -> Result<Vec<u8>, &'static str> {
    let mut out = Vec::with_capacity(body.len());
    let mut rest = body;
    while let Some(c) = rest.chars().next() {
        if c != '\\' {
            let mut utf8 = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
            rest = &rest[c.len_utf8()..];
            continue;
        }
        let bytes = rest.as_bytes();
        let Some(&kind) = bytes.get(1) else {
            return Err(UNABLE);
        };
        let simple = match kind {
            b'a' => Some(0x07),
            b'b' => Some(0x08),
            b'f' => Some(0x0c),
            b'n' => Some(b'\n'),
            b'r' => Some(b'\r'),
            b't' => Some(b'\t'),
            b'v' => Some(0x0b),
            b'\\' | b'\'' | b'"' | b'`' | b'?' => Some(kind),
            _ => None,
        };
        if let Some(byte) = simple {
            out.push(byte);
            rest = &rest[2..];
            continue;
        }
        let (digits, radix) = match kind {
            b'x' | b'X' => (2, 16),
            b'u' | b'U' if is_bytes => return Err(UNABLE),
            b'u' => (4, 16),
            b'U' => (8, 16),
            b'0'..=b'3' => (3, 8),
            _ => return Err(UNABLE),
        };
        // Octal escapes count their first digit, which is `kind` itself.
        let from = if radix == 8 { 1 } else { 2 };
        let number = rest.get(from..from + digits).ok_or(UNABLE)?;
        let value = u32::from_str_radix(number, radix).map_err(|_| UNABLE)?;
        rest = &rest[from + digits..];
        let byte_valued = is_bytes && matches!(kind, b'x' | b'X' | b'0'..=b'3');
        if byte_valued {
            // Two hex or three octal digits (at most `\377`) fit in a byte.
            out.push(u8::try_from(value).map_err(|_| UNABLE)?);
        } else {
            let c = char::from_u32(value).ok_or(INVALID_CODE_POINT)?;
            let mut utf8 = [0; 4];
            out.extend_from_slice(c.encode_utf8(&mut utf8).as_bytes());
        }
    }
    Ok(out)
}

/// Characters of a placeholder tag: safe in any literal for cel-rust's lexer
/// and decoders.
const TAG_ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/// One literal replaced for cel-rust.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Swap {
    start: usize,
    end: usize,
    placeholder: String,
}

/// The literals of one expression that cel-rust must not decode itself.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Literals {
    /// In source order.
    swaps: Vec<Swap>,
    /// Placeholder tag → value, per literal kind.
    strings: HashMap<String, String>,
    bytes: HashMap<String, Vec<u8>>,
}

impl Literals {
    /// Decodes every string and bytes literal among `tokens` and plans a
    /// placeholder for each that is not a plain single-line quoted string
    /// without escapes (the only form cel-rust is known to read as cel-go does).
    pub(crate) fn find(src: &str, tokens: &[Token]) -> Result<Self, LiteralError> {
        let mut needing_swap = Vec::new();
        let mut hex_ints = Vec::new();
        // Strings in the parsed tree that are no placeholder: plain literals,
        // and names, which cel-rust turns into string literals (the field of
        // `x.?name` is one); no tag may equal any of them.
        let mut other_strings = HashSet::new();
        for token in tokens {
            let text = &src[token.start..token.end];
            match token.kind {
                Tok::Ident => {
                    other_strings.insert(text);
                    continue;
                }
                Tok::EscIdent => {
                    other_strings.insert(&text[1..text.len() - 1]);
                    continue;
                }
                Tok::Literal => {}
                Tok::Number => {
                    if let Some(decimal) = hex_int_as_decimal(text) {
                        hex_ints.push(Swap {
                            start: token.start,
                            end: token.end,
                            placeholder: decimal,
                        });
                    }
                    continue;
                }
                _ => continue,
            }
            if !matches!(
                text.as_bytes().first(),
                Some(b'"' | b'\'' | b'r' | b'R' | b'b' | b'B')
            ) {
                continue; // true, false, null, unsigned integers
            }
            let value = decode(text).map_err(|message| LiteralError {
                offset: token.start,
                message,
            })?;
            if is_plain(text) {
                other_strings.insert(&text[1..text.len() - 1]);
            } else {
                needing_swap.push((token, value));
            }
        }
        let mut literals = Self::default();
        let mut next_tag = 0usize;
        for (token, value) in needing_swap {
            let text = &src[token.start..token.end];
            // Line breaks stay where they were and the text after the last
            // one keeps its column, so every later token keeps its line,
            // column and offset wherever the tag fits.
            let newlines = text.matches('\n').count();
            let tail = text.rfind('\n').map_or(0, |i| text.len() - i - 1);
            let (prefix, quotes) = match value {
                Decoded::String(_) => ("", 2),
                Decoded::Bytes(_) => ("b", 3),
            };
            let room = text.len().saturating_sub(quotes + newlines + tail);
            let empty = match &value {
                Decoded::String(s) => s.is_empty(),
                Decoded::Bytes(b) => b.is_empty(),
            };
            if room == 0 && empty {
                // `b""` itself: cel-rust reads an empty literal right, and
                // no tag is empty, so `restore` leaves it alone.
                literals.swaps.push(Swap {
                    start: token.start,
                    end: token.end,
                    placeholder: format!("{prefix}\"\""),
                });
                continue;
            }
            // Tags differ from each other (`tag_text` is one-to-one) and every
            // bytes value in the tree is a placeholder, so only strings can
            // meet another value.
            let tag = loop {
                let tag = tag_text(next_tag, room);
                next_tag += 1;
                let taken =
                    matches!(value, Decoded::String(_)) && other_strings.contains(tag.as_str());
                if !taken {
                    break tag;
                }
            };
            let mut placeholder = format!("{prefix}\"{tag}\"");
            let fill = text
                .len()
                .saturating_sub(placeholder.len() + newlines + tail);
            placeholder.extend(std::iter::repeat_n(' ', fill));
            placeholder.extend(std::iter::repeat_n('\n', newlines));
            placeholder.extend(std::iter::repeat_n(' ', tail));
            match value {
                Decoded::String(s) => {
                    literals.strings.insert(tag, s);
                }
                Decoded::Bytes(b) => {
                    literals.bytes.insert(tag, b);
                }
            }
            literals.swaps.push(Swap {
                start: token.start,
                end: token.end,
                placeholder,
            });
        }
        // Placeholders were planned in source order, hexadecimal ints apart.
        literals.swaps.extend(hex_ints);
        literals.swaps.sort_by_key(|swap| swap.start);
        Ok(literals)
    }

    /// Whether no literal needs a placeholder.
    pub(crate) fn is_empty(&self) -> bool {
        self.swaps.is_empty()
    }

    /// `src` with every planned literal replaced by its placeholder.
    pub(crate) fn apply(&self, src: &str) -> String {
        let mut out = String::with_capacity(src.len());
        let mut at = 0;
        for swap in &self.swaps {
            out.push_str(&src[at..swap.start]);
            out.push_str(&swap.placeholder);
            at = swap.end;
        }
        out.push_str(&src[at..]);
        out
    }

    /// Puts the decoded values back in place of the placeholders in a tree
    /// parsed from [`Literals::apply`]'s text.
    pub(crate) fn restore(&self, expr: &mut IdedExpr) {
        if self.is_empty() {
            return;
        }
        match &mut expr.expr {
            Expr::Literal(LiteralValue::String(s)) => {
                if let Some(value) = self.strings.get(s.inner()) {
                    *s = value.as_str().into();
                }
            }
            Expr::Literal(LiteralValue::Bytes(b)) => {
                let tag = std::str::from_utf8(b.inner()).unwrap_or_default();
                if let Some(value) = self.bytes.get(tag) {
                    *b = value.clone().into();
                }
            }
            Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
            Expr::Call(call) => {
                if let Some(target) = &mut call.target {
                    self.restore(target);
                }
                call.args.iter_mut().for_each(|arg| self.restore(arg));
            }
            Expr::Comprehension(c) => {
                for part in [
                    &mut c.iter_range,
                    &mut c.accu_init,
                    &mut c.loop_cond,
                    &mut c.loop_step,
                    &mut c.result,
                ] {
                    self.restore(part);
                }
            }
            Expr::List(list) => list.elements.iter_mut().for_each(|e| self.restore(e)),
            Expr::Map(map) => {
                for entry in &mut map.entries {
                    self.restore_entry(&mut entry.expr);
                }
            }
            Expr::Struct(s) => {
                for entry in &mut s.entries {
                    self.restore_entry(&mut entry.expr);
                }
            }
            Expr::Select(select) => self.restore(&mut select.operand),
        }
    }

    fn restore_entry(&self, entry: &mut EntryExpr) {
        match entry {
            EntryExpr::MapEntry(e) => {
                self.restore(&mut e.key);
                self.restore(&mut e.value);
            }
            EntryExpr::StructField(f) => self.restore(&mut f.value),
        }
    }
}

/// A quoted string on one line, without prefix, escapes or NUL: cel-rust
/// reads it as cel-go does.
fn is_plain(text: &str) -> bool {
    let bytes = text.as_bytes();
    let quote = bytes[0];
    matches!(quote, b'"' | b'\'')
        && !(bytes.len() >= 6 && bytes.starts_with(&[quote; 3]))
        && !bytes.iter().any(|&b| b == b'\\' || b == 0)
}

/// A hexadecimal int literal (`0x1F`, no `u`) as a decimal one of the same
/// length where it fits (`0031`), or None when `text` is no such literal or
/// its value is no int even with a sign (then cel-rust and cel-go both refuse
/// it). cel-rust reads `-0x1F` as the text "-0x1F" and refuses it; cel-go
/// puts the sign before the digits (`strconv.ParseInt("-1F", 16, 64)`), which
/// also makes `-0x8000000000000000` the smallest int.
fn hex_int_as_decimal(text: &str) -> Option<String> {
    let digits = text.strip_prefix("0x")?;
    let value = u64::from_str_radix(digits, 16).ok()?;
    if value > 1 << 63 {
        return None;
    }
    Some(format!("{value:0>width$}", width = text.len()))
}

/// The `n`th tag in [`TAG_ALPHABET`], `room` characters long where `n` fits.
fn tag_text(mut n: usize, room: usize) -> String {
    let base = TAG_ALPHABET.len();
    let mut digits = Vec::new();
    while n > 0 || digits.len() < room.max(1) {
        digits.push(TAG_ALPHABET[n % base]);
        n /= base;
    }
    digits.reverse();
    String::from_utf8(digits).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(token: &str) -> Result<String, &'static str> {
        match decode(token)? {
            Decoded::String(s) => Ok(s),
            Decoded::Bytes(b) => panic!("{token} decoded to bytes {b:?}"),
        }
    }

    fn bytes(token: &str) -> Result<Vec<u8>, &'static str> {
        match decode(token)? {
            Decoded::Bytes(b) => Ok(b),
            Decoded::String(s) => panic!("{token} decoded to string {s:?}"),
        }
    }

    // Expectations from cel-go's parser/unescape.go and unescape_test.go.
    #[test]
    fn strings_decode_as_cel_go_unescapes_them() {
        assert_eq!(string(r#""hello""#), Ok("hello".into()));
        assert_eq!(
            string(r#"'\a\b\f\n\r\t\v'"#),
            Ok("\x07\x08\x0c\n\r\t\x0b".into())
        );
        assert_eq!(string(r#""\\\'\"\`\?""#), Ok("\\'\"`?".into()));
        assert_eq!(
            string(r#""\x41\X42\u00e9\U0001F600\101""#),
            Ok("ABé😀A".into())
        );
        // In strings, \x and octal name code points, not bytes.
        assert_eq!(string(r#""\xff\377""#), Ok("ÿÿ".into()));
        assert_eq!(string(r#""""say "hi" """"#), Ok("say \"hi\" ".into()));
        assert_eq!(string("'''a\r\nb\rc'''"), Ok("a\nb\nc".into()));
        assert_eq!(string("r'''a\r\nb'''"), Ok("a\nb".into()));
        // Raw literals keep every backslash.
        assert_eq!(string(r#"r"a\n\""#), Ok("a\\n\\".into()));
        assert_eq!(string(r#"R"""a\" b""""#), Ok("a\\\" b".into()));
        assert_eq!(string("r\"\"\"a\0b\"\"\""), Ok("a\0b".into()));
        assert_eq!(string(r#""\ud800""#), Err(INVALID_CODE_POINT));
        assert_eq!(string(r#""\U00110000""#), Err(INVALID_CODE_POINT));
    }

    #[test]
    fn bytes_decode_escapes_to_byte_values() {
        assert_eq!(bytes(r#"b"\xff\377\000""#), Ok(vec![0xff, 0xff, 0]));
        assert_eq!(bytes(r#"B'ÿ'"#), Ok("ÿ".as_bytes().to_vec()));
        assert_eq!(bytes(r#"b"""x"y""""#), Ok(b"x\"y".to_vec()));
        assert_eq!(bytes(r#"br'\x00'"#), Ok(b"\\x00".to_vec()));
        assert_eq!(bytes(r#"bR"""\n""""#), Ok(b"\\n".to_vec()));
        assert_eq!(bytes(r#"b"\u00ff""#), Err(UNABLE));
        assert_eq!(bytes(r#"b"\U000000ff""#), Err(UNABLE));
    }

    #[test]
    fn placeholders_keep_offsets_and_lines_and_avoid_plain_values() {
        let src = "'000' == r'ab' && r\"\"\"a\nb\"\"\" == '' && b\"\\x00\" == b''";
        let tokens = super::super::lexer::tokenize(src).expect("lexes");
        let literals = Literals::find(src, &tokens).expect("decodes");
        let text = literals.apply(src);
        assert_eq!(text.len(), src.len(), "{text:?}");
        // "000" is the first tag of room 3, but a plain literal holds it.
        assert_eq!(
            text,
            "'000' == \"001\" && \"002\"\n     == '' && b\"0003\" == b\"\""
        );
        assert_eq!(literals.strings.get("001").map(String::as_str), Some("ab"));
        assert_eq!(
            literals.strings.get("002").map(String::as_str),
            Some("a\nb")
        );
        assert_eq!(literals.bytes.get("0003"), Some(&vec![0]));
    }

    #[test]
    fn plain_literals_need_no_placeholder() {
        let src = "device.driver == 'gpu.example.com' && \"a\" != ''";
        let tokens = super::super::lexer::tokenize(src).expect("lexes");
        assert!(Literals::find(src, &tokens).expect("decodes").is_empty());
    }
}
