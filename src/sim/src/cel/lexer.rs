//! CEL's lexical grammar (`CEL.g4`, the grammar cel-go and cel-rust generate
//! their parsers from), so that [`super::shape`] sees the tokens the parser
//! will see: a string literal, raw or not, can never hide operators from it.
//!
//! The lexer is strict where the grammar is: an escape sequence the grammar
//! does not define, an unterminated literal or a character outside every token
//! is an error here, so an input the lexer accepts is tokenized exactly as the
//! generated lexer would (longest match, `r`/`b` prefixes, triple quotes).

/// The token kinds the shape check distinguishes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    /// `==`, `!=`, `<`, `<=`, `>=`, `>` and the keyword `in`.
    Relation,
    AndAnd,
    OrOr,
    LBracket,
    RBracket,
    LBrace,
    RBrace,
    LParen,
    RParen,
    Dot,
    Comma,
    Minus,
    Exclam,
    Question,
    Colon,
    Plus,
    /// `*`, `/`, `%`.
    Mul,
    /// `true`, `false`, `null`, strings, bytes, unsigned integers.
    Literal,
    /// Signed integer and floating point literals (a leading `-` may join them).
    Number,
    Ident,
    /// A back-quoted identifier, only valid as a field name.
    EscIdent,
}

/// One token and where it is in the source (byte offsets).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token {
    pub(crate) kind: Tok,
    pub(crate) start: usize,
    pub(crate) end: usize,
}

/// A lexical error: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LexError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

/// Splits `src` into tokens, skipping whitespace and `//` comments.
pub(crate) fn tokenize(src: &str) -> Result<Vec<Token>, LexError> {
    let mut lexer = Lexer {
        src: src.as_bytes(),
        pos: 0,
    };
    let mut tokens = Vec::new();
    while let Some(token) = lexer.next_token()? {
        tokens.push(token);
    }
    Ok(tokens)
}

struct Lexer<'a> {
    src: &'a [u8],
    pos: usize,
}

impl Lexer<'_> {
    fn peek(&self, ahead: usize) -> Option<u8> {
        self.src.get(self.pos + ahead).copied()
    }

    fn starts_with(&self, s: &[u8]) -> bool {
        self.src[self.pos..].starts_with(s)
    }

    fn error(&self, offset: usize, message: impl Into<String>) -> LexError {
        LexError {
            offset,
            message: message.into(),
        }
    }

    fn next_token(&mut self) -> Result<Option<Token>, LexError> {
        loop {
            match self.peek(0) {
                None => return Ok(None),
                Some(b' ' | b'\t' | b'\r' | b'\n' | 0x0c) => self.pos += 1,
                Some(b'/') if self.peek(1) == Some(b'/') => {
                    while self.peek(0).is_some_and(|c| c != b'\n') {
                        self.pos += 1;
                    }
                }
                Some(_) => break,
            }
        }
        let start = self.pos;
        let kind = self.token_kind(start)?;
        Ok(Some(Token {
            kind,
            start,
            end: self.pos,
        }))
    }

    fn token_kind(&mut self, start: usize) -> Result<Tok, LexError> {
        let Some(c) = self.peek(0) else {
            return Err(self.error(start, "unexpected end of input"));
        };
        let two = [c, self.peek(1).unwrap_or(0)];
        let (kind, len) = match &two {
            b"==" | b"!=" | b"<=" | b">=" => (Tok::Relation, 2),
            b"&&" => (Tok::AndAnd, 2),
            b"||" => (Tok::OrOr, 2),
            _ => match c {
                b'<' | b'>' => (Tok::Relation, 1),
                b'[' => (Tok::LBracket, 1),
                b']' => (Tok::RBracket, 1),
                b'{' => (Tok::LBrace, 1),
                b'}' => (Tok::RBrace, 1),
                b'(' => (Tok::LParen, 1),
                b')' => (Tok::RParen, 1),
                b',' => (Tok::Comma, 1),
                b'-' => (Tok::Minus, 1),
                b'!' => (Tok::Exclam, 1),
                b'?' => (Tok::Question, 1),
                b':' => (Tok::Colon, 1),
                b'+' => (Tok::Plus, 1),
                b'*' | b'/' | b'%' => (Tok::Mul, 1),
                b'.' if self.peek(1).is_some_and(|d| d.is_ascii_digit()) => {
                    return Ok(self.number());
                }
                b'.' => (Tok::Dot, 1),
                b'0'..=b'9' => return Ok(self.number()),
                b'"' | b'\'' => {
                    self.string(false)?;
                    return Ok(Tok::Literal);
                }
                b'`' => return self.escaped_ident(start),
                b'a'..=b'z' | b'A'..=b'Z' | b'_' => return self.word(),
                _ => {
                    let shown = std::str::from_utf8(&self.src[start..])
                        .ok()
                        .and_then(|s| s.chars().next())
                        .unwrap_or('\u{fffd}');
                    return Err(self.error(start, format!("token recognition error at: '{shown}'")));
                }
            },
        };
        self.pos += len;
        Ok(kind)
    }

    /// Identifiers, keywords, and literals with an `r`/`b` prefix (the longer
    /// match wins, as in the generated lexer: `r"x"` is a string, `rx` a name).
    fn word(&mut self) -> Result<Tok, LexError> {
        let quote_at = |i: usize| matches!(self.peek(i), Some(b'"' | b'\''));
        let raw = |c: Option<u8>| matches!(c, Some(b'r' | b'R'));
        let bytes = |c: Option<u8>| matches!(c, Some(b'b' | b'B'));
        let prefix = if raw(self.peek(0)) && quote_at(1) {
            Some((1, true))
        } else if bytes(self.peek(0)) && quote_at(1) {
            Some((1, false))
        } else if bytes(self.peek(0)) && raw(self.peek(1)) && quote_at(2) {
            Some((2, true))
        } else {
            None
        };
        if let Some((len, is_raw)) = prefix {
            self.pos += len;
            self.string(is_raw)?;
            return Ok(Tok::Literal);
        }
        let start = self.pos;
        while self
            .peek(0)
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
        {
            self.pos += 1;
        }
        Ok(match &self.src[start..self.pos] {
            b"in" => Tok::Relation,
            b"true" | b"false" | b"null" => Tok::Literal,
            _ => Tok::Ident,
        })
    }

    fn escaped_ident(&mut self, start: usize) -> Result<Tok, LexError> {
        self.pos += 1;
        let body = self.pos;
        while self.peek(0).is_some_and(|c| {
            c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'/' | b' ')
        }) {
            self.pos += 1;
        }
        if self.pos == body || self.peek(0) != Some(b'`') {
            return Err(self.error(start, "token recognition error at: '`'"));
        }
        self.pos += 1;
        Ok(Tok::EscIdent)
    }

    /// `NUM_INT`, `NUM_UINT` and `NUM_FLOAT`.
    fn number(&mut self) -> Tok {
        let digits = |lexer: &mut Self| {
            let from = lexer.pos;
            while lexer.peek(0).is_some_and(|c| c.is_ascii_digit()) {
                lexer.pos += 1;
            }
            lexer.pos > from
        };
        let exponent = |lexer: &mut Self| {
            if matches!(lexer.peek(0), Some(b'e' | b'E')) {
                let sign = usize::from(matches!(lexer.peek(1), Some(b'+' | b'-')));
                if lexer.peek(1 + sign).is_some_and(|c| c.is_ascii_digit()) {
                    lexer.pos += 1 + sign;
                    digits(lexer);
                }
            }
        };
        if self.starts_with(b"0x") && self.peek(2).is_some_and(|c| c.is_ascii_hexdigit()) {
            self.pos += 2;
            while self.peek(0).is_some_and(|c| c.is_ascii_hexdigit()) {
                self.pos += 1;
            }
            if matches!(self.peek(0), Some(b'u' | b'U')) {
                self.pos += 1;
                return Tok::Literal;
            }
            return Tok::Number;
        }
        if self.peek(0) == Some(b'.') {
            self.pos += 1;
            digits(self);
            exponent(self);
            return Tok::Number;
        }
        digits(self);
        if self.peek(0) == Some(b'.') && self.peek(1).is_some_and(|c| c.is_ascii_digit()) {
            self.pos += 1;
            digits(self);
            exponent(self);
            return Tok::Number;
        }
        if matches!(self.peek(0), Some(b'u' | b'U')) {
            self.pos += 1;
            return Tok::Literal;
        }
        exponent(self);
        Tok::Number
    }

    /// A quoted literal starting at the quote under the cursor. A triple
    /// quote that never closes falls back to the empty string `""`, as the
    /// generated lexer's longest successful match does.
    fn string(&mut self, raw: bool) -> Result<(), LexError> {
        let start = self.pos;
        let Some(quote) = self.peek(0) else {
            return Err(self.error(start, "unterminated string"));
        };
        let triple = [quote; 3];
        if self.starts_with(&triple) {
            self.pos += 3;
            if self.rest_of_triple(triple, raw)? {
                return Ok(());
            }
            self.pos = start;
        }
        self.pos += 1;
        loop {
            match self.peek(0) {
                None | Some(b'\n' | b'\r') => {
                    return Err(self.error(start, "unterminated string literal"));
                }
                Some(c) if c == quote => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(b'\\') if !raw => self.escape()?,
                Some(_) => self.pos += 1,
            }
        }
    }

    /// After an opening triple quote: consumes through the closing one and
    /// returns true, or returns false when there is none.
    fn rest_of_triple(&mut self, triple: [u8; 3], raw: bool) -> Result<bool, LexError> {
        while self.pos < self.src.len() {
            if self.starts_with(&triple) {
                self.pos += 3;
                return Ok(true);
            }
            if !raw && self.peek(0) == Some(b'\\') {
                self.escape()?;
            } else {
                self.pos += 1;
            }
        }
        Ok(false)
    }

    /// One escape sequence of `ESC_SEQ`; anything else is an error.
    fn escape(&mut self) -> Result<(), LexError> {
        let at = self.pos;
        let hex = |lexer: &Self, from: usize, n: usize| {
            (from..from + n).all(|i| lexer.peek(i).is_some_and(|c| c.is_ascii_hexdigit()))
        };
        let len = match self.peek(1) {
            Some(
                b'a' | b'b' | b'f' | b'n' | b'r' | b't' | b'v' | b'"' | b'\'' | b'\\' | b'?' | b'`',
            ) => 2,
            Some(b'x' | b'X') if hex(self, 2, 2) => 4,
            Some(b'u') if hex(self, 2, 4) => 6,
            Some(b'U') if hex(self, 2, 8) => 10,
            Some(b'0'..=b'3')
                if matches!(self.peek(2), Some(b'0'..=b'7'))
                    && matches!(self.peek(3), Some(b'0'..=b'7')) =>
            {
                4
            }
            _ => return Err(self.error(at, "invalid escape sequence in string literal")),
        };
        self.pos += len;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(src: &str) -> Vec<Tok> {
        tokenize(src)
            .expect("lexes")
            .into_iter()
            .map(|t| t.kind)
            .collect()
    }

    #[test]
    fn raw_string_backslash_does_not_escape_the_quote() {
        // The shape of the stack-overflow repro: `r"\"` is one complete literal.
        assert_eq!(
            kinds(r#"r"\" != "" && device.driver"#),
            [
                Tok::Literal,
                Tok::Relation,
                Tok::Literal,
                Tok::AndAnd,
                Tok::Ident,
                Tok::Dot,
                Tok::Ident
            ]
        );
    }

    #[test]
    fn prefixes_and_keywords() {
        assert_eq!(kinds("rx"), [Tok::Ident]);
        assert_eq!(kinds("br'x'"), [Tok::Literal]);
        assert_eq!(kinds("rb'x'"), [Tok::Ident, Tok::Literal]);
        assert_eq!(kinds("x in y"), [Tok::Ident, Tok::Relation, Tok::Ident]);
        assert_eq!(kinds("inx"), [Tok::Ident]);
        assert_eq!(kinds("true null"), [Tok::Literal, Tok::Literal]);
    }

    #[test]
    fn triple_quotes_and_comments() {
        assert_eq!(kinds("'''a'b\n'''"), [Tok::Literal]);
        // Unclosed triple quote: `""` then a string `"a"`.
        assert_eq!(kinds(r#""""a""#), [Tok::Literal, Tok::Literal]);
        assert_eq!(
            kinds("1 // + 2 (\n+ 3"),
            [Tok::Number, Tok::Plus, Tok::Number]
        );
    }

    #[test]
    fn numbers() {
        assert_eq!(
            kinds("1u 0x1F 0x1Fu 1.5e3 .5 1e9"),
            [
                Tok::Literal,
                Tok::Number,
                Tok::Literal,
                Tok::Number,
                Tok::Number,
                Tok::Number
            ]
        );
        assert_eq!(kinds("1.foo"), [Tok::Number, Tok::Dot, Tok::Ident]);
    }

    #[test]
    fn strictness() {
        assert!(tokenize(r#""\q""#).is_err());
        assert!(tokenize("\"abc").is_err());
        assert!(tokenize("'a\nb'").is_err());
        assert!(tokenize("a # b").is_err());
        assert!(tokenize("``").is_err());
        assert_eq!(kinds("`a.b-c`"), [Tok::EscIdent]);
        assert_eq!(kinds(r#""\x41\u0041\101""#), [Tok::Literal]);
    }
}
