//! The shape of an expression, checked before cel-rust's parser sees it.
//!
//! cel-go parses with two recursion guards (`parser/parser.go`, default
//! `maxRecursionDepth` 250): a parse listener that counts, per grammar rule,
//! how many contexts of that rule are open — left-recursive rules (`relation`,
//! `calc`, `member`) open one per operator of a chain — and fails with
//! "expression recursion limit exceeded: 250" past 250; and a visitor that
//! counts nested ternaries, relations, arithmetic, selections, member calls
//! and indexes on the path being built and fails with "max recursion depth
//! exceeded" past 250. cel-rust 0.13 (through kube-cel 0.8) only counts
//! nested `expr` rules, with a limit of 96, so a chain like `a.b.b.b…` or
//! `1 + 1 + …` recurses once per operator in its visitor and overflows the
//! stack, which no error handling can catch.
//!
//! [`check`] is a recognizer for the same grammar (`CEL.g4`) that keeps both
//! of cel-go's counters, over the tokens of [`super::lexer`], with one native
//! stack frame per nested expression: its own recursion is bounded by the
//! limit it enforces. Only an expression it accepts reaches cel-rust, so the
//! parser there never nests deeper than cel-go would allow.
//!
//! It also finds runs of an even number of unary `!` or `-` (`!!x`, `--1`):
//! cel-go returns the operand unchanged for those, cel-rust 0.13 applies the
//! operator once (`!!true` is false there). [`Shape::normalized`] blanks such
//! runs, which gives cel-go's tree and keeps every byte offset.

use std::borrow::Cow;

use super::lexer::{LexError, Tok, Token, tokenize};
use kube_cel::cel::common::ast::IdedExpr;

use super::literals::{LiteralError, Literals};

/// cel-go's default `maxRecursionDepth`, for both of its counters.
pub(crate) const MAX_RECURSION: usize = 250;

/// cel-go's message when a grammar rule nests too deep.
pub(crate) const RULE_LIMIT_MESSAGE: &str = "expression recursion limit exceeded: 250";
/// cel-go's message when the visitor nests too deep.
pub(crate) const VISIT_LIMIT_MESSAGE: &str = "max recursion depth exceeded";

/// Why an expression was refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShapeError {
    /// A character sequence that is no token of the grammar.
    Lex(LexError),
    /// The tokens do not form an expression; `offset` is where it broke,
    /// `depth` how deep its brackets (`(`, `[`, `{`) nest at most.
    Syntax { offset: usize, depth: usize },
    /// One of cel-go's recursion limits; the message is cel-go's.
    TooDeep(&'static str),
    /// A string or bytes literal cel-go's parser cannot decode.
    Literal(LiteralError),
}

/// What [`check`] learnt about an accepted expression.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Byte ranges of unary operator runs of even length.
    even_unary_runs: Vec<(usize, usize)>,
    /// Literals cel-rust must see as placeholders.
    literals: Literals,
}

impl Shape {
    /// What a malformed expression needs before cel-rust words its syntax
    /// error: its literals as placeholders where it lexes (cel-rust's lexer
    /// must never meet a literal it reads differently), nothing else.
    pub(crate) fn for_malformed(src: &str) -> Self {
        let literals = tokenize(src)
            .ok()
            .and_then(|tokens| Literals::find(src, &tokens).ok())
            .unwrap_or_default();
        Self {
            even_unary_runs: Vec::new(),
            literals,
        }
    }

    /// Puts the literals' decoded values into a tree parsed from
    /// [`Shape::normalized`]'s text.
    pub(crate) fn restore_literals(&self, ast: &mut IdedExpr) {
        self.literals.restore(ast);
    }

    /// `src` with every even unary run replaced by spaces and literals by
    /// their placeholders (see [`Literals`]); offsets unchanged.
    pub(crate) fn normalized<'a>(&self, src: &'a str) -> Cow<'a, str> {
        if self.even_unary_runs.is_empty() && self.literals.is_empty() {
            return Cow::Borrowed(src);
        }
        let mut bytes = src.as_bytes().to_vec();
        for &(start, end) in &self.even_unary_runs {
            for b in &mut bytes[start..end] {
                if matches!(*b, b'!' | b'-') {
                    *b = b' ';
                }
            }
        }
        // Only ASCII operators were replaced by ASCII spaces.
        let blanked = String::from_utf8(bytes).unwrap_or_else(|_| src.to_string());
        Cow::Owned(self.literals.apply(&blanked))
    }
}

/// Checks `src` against the grammar and cel-go's recursion limits.
pub(crate) fn check(src: &str) -> Result<Shape, ShapeError> {
    let tokens = tokenize(src).map_err(ShapeError::Lex)?;
    let mut recognizer = Recognizer {
        tokens: &tokens,
        pos: 0,
        open: [0; RULES],
        end: src.len(),
        shape: Shape::default(),
    };
    let depth = bracket_depth(&tokens);
    let with_count = |e: ShapeError| match e {
        ShapeError::Syntax { offset, .. } => ShapeError::Syntax { offset, depth },
        other => other,
    };
    let visit_depth = recognizer.expr().map_err(with_count)?;
    if let Some(t) = recognizer.tokens.get(recognizer.pos) {
        return Err(ShapeError::Syntax {
            offset: t.start,
            depth,
        });
    }
    if visit_depth > MAX_RECURSION {
        return Err(ShapeError::TooDeep(VISIT_LIMIT_MESSAGE));
    }
    let mut shape = recognizer.shape;
    shape.literals = Literals::find(src, &tokens).map_err(ShapeError::Literal)?;
    Ok(shape)
}

/// `src` up to the end of the token after the one at `offset` (where the
/// grammar broke), or all of it when there is none.
pub(crate) fn malformed_prefix(src: &str, offset: usize) -> &str {
    let Ok(tokens) = tokenize(src) else {
        return src;
    };
    tokens
        .iter()
        .position(|t| t.start >= offset)
        .and_then(|i| tokens.get(i + 1))
        .map_or(src, |next| &src[..next.end])
}

/// How deep the brackets of `tokens` nest at most (closers without an opener
/// are ignored).
fn bracket_depth(tokens: &[Token]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for token in tokens {
        match token.kind {
            Tok::LParen | Tok::LBracket | Tok::LBrace => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            Tok::RParen | Tok::RBracket | Tok::RBrace => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The rules of `CEL.g4`, whose open contexts cel-go's listener counts.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Expr,
    ConditionalOr,
    ConditionalAnd,
    Relation,
    Calc,
    Unary,
    Member,
    Primary,
    ExprList,
    ListInit,
    FieldInitializerList,
    OptField,
    MapInitializerList,
    EscapeIdent,
    OptExpr,
    Literal,
}

const RULES: usize = 16;

type Parsed = Result<usize, ShapeError>;

struct Recognizer<'t> {
    tokens: &'t [Token],
    pos: usize,
    /// Open contexts per rule, as cel-go's listener counts them.
    open: [usize; RULES],
    /// Offset reported for an error at the end of input.
    end: usize,
    shape: Shape,
}

impl Recognizer<'_> {
    fn peek(&self) -> Option<Tok> {
        self.peek_at(0)
    }

    fn peek_at(&self, ahead: usize) -> Option<Tok> {
        self.tokens.get(self.pos + ahead).map(|t| t.kind)
    }

    fn syntax_error(&self) -> ShapeError {
        ShapeError::Syntax {
            offset: self.tokens.get(self.pos).map_or(self.end, |t| t.start),
            depth: 0,
        }
    }

    fn bump(&mut self) {
        self.pos += 1;
    }

    fn eat(&mut self, kind: Tok) -> bool {
        let hit = self.peek() == Some(kind);
        if hit {
            self.bump();
        }
        hit
    }

    fn expect(&mut self, kind: Tok) -> Result<(), ShapeError> {
        if self.eat(kind) {
            Ok(())
        } else {
            Err(self.syntax_error())
        }
    }

    /// A rule context opens (a rule is entered, or a left-recursive rule
    /// pushes a context for one more operator).
    fn open(&mut self, rule: Rule) -> Result<(), ShapeError> {
        let open = &mut self.open[rule as usize];
        *open += 1;
        if *open > MAX_RECURSION {
            return Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE));
        }
        Ok(())
    }

    fn close(&mut self, rule: Rule, contexts: usize) {
        let open = &mut self.open[rule as usize];
        *open = open.saturating_sub(contexts);
    }

    /// `expr: conditionalOr ('?' conditionalOr ':' expr)?`. Every function
    /// returns the visitor depth of what it parsed.
    fn expr(&mut self) -> Parsed {
        self.open(Rule::Expr)?;
        let mut depth = self.conditional(Rule::ConditionalOr)?;
        if self.eat(Tok::Question) {
            let then = self.conditional(Rule::ConditionalOr)?;
            self.expect(Tok::Colon)?;
            let otherwise = self.expr()?;
            depth = depth.max(then).max(otherwise) + 1;
        }
        self.close(Rule::Expr, 1);
        Ok(depth)
    }

    /// `conditionalOr` and `conditionalAnd`: loops, balanced by both parsers,
    /// not counted by the visitor.
    fn conditional(&mut self, rule: Rule) -> Parsed {
        self.open(rule)?;
        let (separator, part) = match rule {
            Rule::ConditionalOr => (Tok::OrOr, Rule::ConditionalAnd),
            _ => (Tok::AndAnd, Rule::Relation),
        };
        let parse_part = |r: &mut Self| match part {
            Rule::ConditionalAnd => r.conditional(Rule::ConditionalAnd),
            _ => r.relation(0),
        };
        let mut depth = parse_part(self)?;
        while self.eat(separator) {
            depth = depth.max(parse_part(self)?);
        }
        self.close(rule, 1);
        Ok(depth)
    }

    /// `relation: calc | relation op relation`, as ANTLR runs a left-recursive
    /// rule: one context per operator stays open until the chain ends.
    fn relation(&mut self, precedence: u8) -> Parsed {
        self.open(Rule::Relation)?;
        let mut contexts = 1;
        let mut depth = self.calc(0)?;
        while precedence <= 1 && self.peek() == Some(Tok::Relation) {
            self.open(Rule::Relation)?;
            contexts += 1;
            self.bump();
            let right = self.relation(2)?;
            depth = depth.max(right) + 1;
        }
        self.close(Rule::Relation, contexts);
        Ok(depth)
    }

    /// `calc: unary | calc ('*'|'/'|'%') calc | calc ('+'|'-') calc`.
    fn calc(&mut self, precedence: u8) -> Parsed {
        self.open(Rule::Calc)?;
        let mut contexts = 1;
        let mut depth = self.unary()?;
        loop {
            let right_precedence = match self.peek() {
                Some(Tok::Mul) if precedence <= 2 => 3,
                Some(Tok::Plus | Tok::Minus) if precedence <= 1 => 2,
                _ => break,
            };
            self.open(Rule::Calc)?;
            contexts += 1;
            self.bump();
            let right = self.calc(right_precedence)?;
            depth = depth.max(right) + 1;
        }
        self.close(Rule::Calc, contexts);
        Ok(depth)
    }

    /// `unary: member | '!'+ member | '-'+ member`. A single `-` before a
    /// number is the number's sign (`literal`), as ANTLR predicts it.
    fn unary(&mut self) -> Parsed {
        self.open(Rule::Unary)?;
        let op = self.peek();
        if matches!(op, Some(Tok::Exclam | Tok::Minus)) {
            let first = self.pos;
            let mut run = 0;
            while self.peek() == op {
                run += 1;
                self.bump();
            }
            let signed_number =
                op == Some(Tok::Minus) && run == 1 && self.peek() == Some(Tok::Number);
            if signed_number {
                self.pos = first;
            } else if run % 2 == 0 {
                let start = self.tokens[first].start;
                let end = self.tokens[self.pos - 1].end;
                self.shape.even_unary_runs.push((start, end));
            }
        }
        let depth = self.member()?;
        self.close(Rule::Unary, 1);
        Ok(depth)
    }

    /// `member: primary | member '.' '?'? escapeIdent | member '.' IDENT '('
    /// exprList? ')' | member '[' '?'? expr ']'` (left-recursive).
    fn member(&mut self) -> Parsed {
        self.open(Rule::Member)?;
        let mut contexts = 1;
        let mut depth = self.primary()?;
        loop {
            match self.peek() {
                Some(Tok::Dot) => {
                    self.open(Rule::Member)?;
                    contexts += 1;
                    self.bump();
                    let call =
                        self.peek() == Some(Tok::Ident) && self.peek_at(1) == Some(Tok::LParen);
                    if call {
                        self.bump();
                        self.bump();
                        let args = self.call_args()?;
                        depth = depth.max(args) + 1;
                    } else {
                        self.eat(Tok::Question);
                        self.escape_ident()?;
                        depth += 1;
                    }
                }
                Some(Tok::LBracket) => {
                    self.open(Rule::Member)?;
                    contexts += 1;
                    self.bump();
                    self.eat(Tok::Question);
                    let index = self.expr()?;
                    self.expect(Tok::RBracket)?;
                    depth = depth.max(index) + 1;
                }
                _ => break,
            }
        }
        self.close(Rule::Member, contexts);
        Ok(depth)
    }

    /// `exprList? ')'` after an opening parenthesis.
    fn call_args(&mut self) -> Parsed {
        let mut depth = 0;
        if !self.eat(Tok::RParen) {
            self.open(Rule::ExprList)?;
            depth = self.expr()?;
            while self.eat(Tok::Comma) {
                depth = depth.max(self.expr()?);
            }
            self.close(Rule::ExprList, 1);
            self.expect(Tok::RParen)?;
        }
        Ok(depth)
    }

    fn escape_ident(&mut self) -> Result<(), ShapeError> {
        self.open(Rule::EscapeIdent)?;
        if !self.eat(Tok::Ident) {
            self.expect(Tok::EscIdent)?;
        }
        self.close(Rule::EscapeIdent, 1);
        Ok(())
    }

    fn primary(&mut self) -> Parsed {
        self.open(Rule::Primary)?;
        let depth = match self.peek() {
            Some(Tok::Dot | Tok::Ident) => self.name()?,
            Some(Tok::LParen) => {
                self.bump();
                let inner = self.expr()?;
                self.expect(Tok::RParen)?;
                inner
            }
            Some(Tok::LBracket) => {
                self.bump();
                let mut depth = 0;
                if !matches!(self.peek(), Some(Tok::RBracket | Tok::Comma)) {
                    depth = self.entries(Rule::ListInit, Tok::RBracket)?;
                }
                self.eat(Tok::Comma);
                self.expect(Tok::RBracket)?;
                depth
            }
            Some(Tok::LBrace) => {
                self.bump();
                let mut depth = 0;
                if !matches!(self.peek(), Some(Tok::RBrace | Tok::Comma)) {
                    depth = self.entries(Rule::MapInitializerList, Tok::RBrace)?;
                }
                self.eat(Tok::Comma);
                self.expect(Tok::RBrace)?;
                depth
            }
            Some(Tok::Minus) if self.peek_at(1) == Some(Tok::Number) => {
                self.bump();
                self.literal()?
            }
            Some(Tok::Number | Tok::Literal) => self.literal()?,
            _ => return Err(self.syntax_error()),
        };
        self.close(Rule::Primary, 1);
        Ok(depth)
    }

    fn literal(&mut self) -> Parsed {
        self.open(Rule::Literal)?;
        self.bump();
        self.close(Rule::Literal, 1);
        Ok(0)
    }

    /// `'.'? IDENT`, a global call `'.'? IDENT '(' exprList? ')'`, or a
    /// message `'.'? IDENT ('.' IDENT)* '{' fieldInitializerList? ','? '}'`.
    fn name(&mut self) -> Parsed {
        self.eat(Tok::Dot);
        self.expect(Tok::Ident)?;
        let mut ahead = 0;
        while self.peek_at(ahead) == Some(Tok::Dot) && self.peek_at(ahead + 1) == Some(Tok::Ident) {
            ahead += 2;
        }
        if self.peek_at(ahead) == Some(Tok::LBrace) {
            self.pos += ahead + 1;
            let mut depth = 0;
            if !matches!(self.peek(), Some(Tok::RBrace | Tok::Comma)) {
                depth = self.entries(Rule::FieldInitializerList, Tok::RBrace)?;
            }
            self.eat(Tok::Comma);
            self.expect(Tok::RBrace)?;
            return Ok(depth);
        }
        if self.eat(Tok::LParen) {
            return self.call_args();
        }
        Ok(0)
    }

    /// The elements of a list, map or message literal; a trailing comma is
    /// left for the caller.
    fn entries(&mut self, rule: Rule, close: Tok) -> Parsed {
        self.open(rule)?;
        let mut depth = self.entry(rule)?;
        while self.peek() == Some(Tok::Comma) && self.peek_at(1) != Some(close) {
            self.bump();
            depth = depth.max(self.entry(rule)?);
        }
        self.close(rule, 1);
        Ok(depth)
    }

    fn entry(&mut self, rule: Rule) -> Parsed {
        match rule {
            Rule::ListInit => self.opt_expr(),
            Rule::MapInitializerList => {
                let key = self.opt_expr()?;
                self.expect(Tok::Colon)?;
                Ok(key.max(self.expr()?))
            }
            _ => {
                self.open(Rule::OptField)?;
                self.eat(Tok::Question);
                self.escape_ident()?;
                self.close(Rule::OptField, 1);
                self.expect(Tok::Colon)?;
                self.expr()
            }
        }
    }

    fn opt_expr(&mut self) -> Parsed {
        self.open(Rule::OptExpr)?;
        self.eat(Tok::Question);
        let depth = self.expr()?;
        self.close(Rule::OptExpr, 1);
        Ok(depth)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(op: &str, n: usize) -> String {
        let mut s = "1".to_string();
        for _ in 0..n {
            s.push_str(op);
            s.push('1');
        }
        s
    }

    #[test]
    fn accepts_ordinary_expressions() {
        for src in [
            "device.driver == 'a' && device.attributes['x'].y > 1",
            "[1, 2,].all(x, x > 0) ? {'a': 1,}['a'] == 1 : false",
            "a.?b.orValue(1) == 1 && [?x] == [] && {?'k': v} == {}",
            "m{f: 1, ?g: 2} == .n.m{}",
            "-1 < 0 && 1 - -1 == 2 && !(true) == false",
            "f() && g(1, 2) && x.`a.b`",
        ] {
            assert!(check(src).is_ok(), "{src}: {:?}", check(src));
        }
    }

    #[test]
    fn rejects_syntax_errors() {
        for src in ["", "1 +", "(1", "f(1,)", "a.", "1 2", "a[]", "[1 2]", "{1}"] {
            assert!(
                matches!(check(src), Err(ShapeError::Syntax { .. })),
                "{src}: {:?}",
                check(src)
            );
        }
    }

    #[test]
    fn left_recursive_chains_count_per_operator() {
        // `1 + 1 + …`: the calc rule holds one context per operator plus the
        // rule's own and the right operand's: 248 operators open 250.
        assert!(check(&chain(" + ", 248)).is_ok());
        assert_eq!(
            check(&chain(" + ", 249)),
            Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE))
        );
        assert_eq!(
            check(&chain(" == ", 249)),
            Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE))
        );
        let members = format!("a{}", ".b".repeat(260));
        assert_eq!(
            check(&members),
            Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE))
        );
        // && and || chains are loops: any length.
        assert!(check(&chain(" && ", 5000)).is_ok());
    }

    #[test]
    fn nesting_counts_per_level() {
        let nested = |n: usize| format!("{}1{}", "(".repeat(n), ")".repeat(n));
        assert!(check(&nested(249)).is_ok());
        assert_eq!(
            check(&nested(250)),
            Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE))
        );
        let ternaries = format!("{}1", "true ? 1 : ".repeat(300));
        assert_eq!(
            check(&ternaries),
            Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE))
        );
    }

    #[test]
    fn visitor_depth_adds_different_chains() {
        // 200 `+` then 100 `<`: each rule stays under 250, the visitor's
        // single counter (calc and relation nodes on one path) does not.
        let src = format!("{}{}", chain(" + ", 200), " < 1".repeat(100));
        assert_eq!(check(&src), Err(ShapeError::TooDeep(VISIT_LIMIT_MESSAGE)));
    }

    #[test]
    fn string_literals_hide_nothing() {
        let src = format!(r#"r"\" != "" && device{}"#, ".driver".repeat(20_000));
        assert_eq!(check(&src), Err(ShapeError::TooDeep(RULE_LIMIT_MESSAGE)));
    }

    #[test]
    fn even_unary_runs_are_blanked() {
        let shape = check("!!true && --1 > 0 && !!!false && 1 - -1 == 2").expect("valid");
        assert_eq!(
            shape.normalized("!!true && --1 > 0 && !!!false && 1 - -1 == 2"),
            "  true &&   1 > 0 && !!!false && 1 - -1 == 2"
        );
        assert_eq!(check("-1").expect("valid").normalized("-1"), "-1");
    }
}
