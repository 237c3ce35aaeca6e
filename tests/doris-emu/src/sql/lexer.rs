//! The SQL lexer: text → tokens with byte positions. Never panics; bad input becomes a [`LexError`].

/// A token kind.
#[derive(Debug, Clone, PartialEq)]
pub enum Tok {
    /// A bare word (keyword or identifier), as written.
    Word(String),
    /// A `` `backticked` `` identifier (never a keyword).
    Quoted(String),
    /// A string literal, unescaped.
    Str(String),
    /// A numeric literal, as written (`12`, `1.5`, `1e3`, `.5`).
    Number(String),
    /// `@`
    At,
    /// `@@`
    AtAt,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `,`
    Comma,
    /// `.`
    Dot,
    /// `;`
    Semi,
    /// `*`
    Star,
    /// `+`
    Plus,
    /// `-`
    Minus,
    /// `/`
    Slash,
    /// `%`
    Percent,
    /// `=`
    Eq,
    /// `!=` or `<>`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `<=>`
    NullSafeEq,
    /// `!`
    Bang,
    /// `||`
    OrOr,
    /// `&&`
    AndAnd,
    /// `?` (prepared statement placeholder; never bound here)
    Question,
    /// `:`
    Colon,
    /// `[` / `]` / `{` / `}` and other punctuation we only report in errors.
    Other(char),
    /// End of input.
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Word(w) => w.clone(),
            Tok::Quoted(w) => format!("`{w}`"),
            Tok::Str(s) => format!("'{s}'"),
            Tok::Number(n) => n.clone(),
            Tok::At => "@".into(),
            Tok::AtAt => "@@".into(),
            Tok::LParen => "(".into(),
            Tok::RParen => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Dot => ".".into(),
            Tok::Semi => ";".into(),
            Tok::Star => "*".into(),
            Tok::Plus => "+".into(),
            Tok::Minus => "-".into(),
            Tok::Slash => "/".into(),
            Tok::Percent => "%".into(),
            Tok::Eq => "=".into(),
            Tok::Ne => "!=".into(),
            Tok::Lt => "<".into(),
            Tok::Le => "<=".into(),
            Tok::Gt => ">".into(),
            Tok::Ge => ">=".into(),
            Tok::NullSafeEq => "<=>".into(),
            Tok::Bang => "!".into(),
            Tok::OrOr => "||".into(),
            Tok::AndAnd => "&&".into(),
            Tok::Question => "?".into(),
            Tok::Colon => ":".into(),
            Tok::Other(c) => c.to_string(),
            Tok::Eof => "<EOF>".into(),
        }
    }
}

/// A token and where it is in the statement text.
#[derive(Debug, Clone, PartialEq)]
pub struct Token {
    /// What it is.
    pub tok: Tok,
    /// Byte offset of its first character.
    pub start: usize,
    /// Byte offset just past its last character.
    pub end: usize,
}

/// A lexing failure: what went wrong and at which byte offset.
#[derive(Debug, Clone, PartialEq)]
pub struct LexError {
    /// Message.
    pub message: String,
    /// Byte offset.
    pub pos: usize,
}

/// Split `sql` into tokens, skipping whitespace and comments; always ends with [`Tok::Eof`].
pub fn tokenize(sql: &str) -> Result<Vec<Token>, LexError> {
    let chars: Vec<(usize, char)> = sql.char_indices().collect();
    let n = chars.len();
    let at = |i: usize| -> Option<char> { chars.get(i).map(|c| c.1) };
    let off = |i: usize| -> usize { chars.get(i).map(|c| c.0).unwrap_or(sql.len()) };
    let mut out = Vec::new();
    let mut i = 0;
    while i < n {
        let c = chars[i].1;
        let start = off(i);
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        // comments
        if c == '#' || (c == '-' && at(i + 1) == Some('-')) {
            while i < n && chars[i].1 != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && at(i + 1) == Some('*') {
            let mut j = i + 2;
            loop {
                if j >= n {
                    return Err(LexError {
                        message: "unterminated comment".into(),
                        pos: start,
                    });
                }
                if chars[j].1 == '*' && at(j + 1) == Some('/') {
                    j += 2;
                    break;
                }
                j += 1;
            }
            i = j;
            continue;
        }
        let single = |t: Tok| (t, 1usize);
        let (tok, len) = match c {
            '(' => single(Tok::LParen),
            ')' => single(Tok::RParen),
            ',' => single(Tok::Comma),
            ';' => single(Tok::Semi),
            '*' => single(Tok::Star),
            '+' => single(Tok::Plus),
            '-' => single(Tok::Minus),
            '/' => single(Tok::Slash),
            '%' => single(Tok::Percent),
            '=' => {
                if at(i + 1) == Some('=') {
                    (Tok::Eq, 2)
                } else {
                    single(Tok::Eq)
                }
            }
            '?' => single(Tok::Question),
            ':' => single(Tok::Colon),
            '!' => {
                if at(i + 1) == Some('=') {
                    (Tok::Ne, 2)
                } else {
                    single(Tok::Bang)
                }
            }
            '<' => match (at(i + 1), at(i + 2)) {
                (Some('='), Some('>')) => (Tok::NullSafeEq, 3),
                (Some('='), _) => (Tok::Le, 2),
                (Some('>'), _) => (Tok::Ne, 2),
                _ => single(Tok::Lt),
            },
            '>' => {
                if at(i + 1) == Some('=') {
                    (Tok::Ge, 2)
                } else {
                    single(Tok::Gt)
                }
            }
            '|' if at(i + 1) == Some('|') => (Tok::OrOr, 2),
            '&' if at(i + 1) == Some('&') => (Tok::AndAnd, 2),
            '@' => {
                if at(i + 1) == Some('@') {
                    (Tok::AtAt, 2)
                } else {
                    single(Tok::At)
                }
            }
            '.' if !at(i + 1).is_some_and(|d| d.is_ascii_digit()) => single(Tok::Dot),
            '`' => {
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match at(j) {
                        None => {
                            return Err(LexError {
                                message: "unterminated quoted identifier".into(),
                                pos: start,
                            });
                        }
                        Some('`') if at(j + 1) == Some('`') => {
                            s.push('`');
                            j += 2;
                        }
                        Some('`') => {
                            j += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(ch);
                            j += 1;
                        }
                    }
                }
                (Tok::Quoted(s), j - i)
            }
            '\'' | '"' => {
                let q = c;
                let mut s = String::new();
                let mut j = i + 1;
                loop {
                    match at(j) {
                        None => {
                            return Err(LexError {
                                message: "unterminated string literal".into(),
                                pos: start,
                            });
                        }
                        Some('\\') => {
                            let Some(e) = at(j + 1) else {
                                return Err(LexError {
                                    message: "unterminated string literal".into(),
                                    pos: start,
                                });
                            };
                            s.push(match e {
                                'n' => '\n',
                                't' => '\t',
                                'r' => '\r',
                                '0' => '\0',
                                'b' => '\u{8}',
                                'Z' => '\u{1a}',
                                other => other,
                            });
                            j += 2;
                        }
                        Some(ch) if ch == q && at(j + 1) == Some(q) => {
                            s.push(q);
                            j += 2;
                        }
                        Some(ch) if ch == q => {
                            j += 1;
                            break;
                        }
                        Some(ch) => {
                            s.push(ch);
                            j += 1;
                        }
                    }
                }
                (Tok::Str(s), j - i)
            }
            d if d.is_ascii_digit() || d == '.' => {
                let mut j = i;
                let mut seen_dot = false;
                while let Some(ch) = at(j) {
                    if ch.is_ascii_digit() {
                        j += 1;
                    } else if ch == '.' && !seen_dot {
                        seen_dot = true;
                        j += 1;
                    } else {
                        break;
                    }
                }
                // exponent
                if matches!(at(j), Some('e') | Some('E')) {
                    let mut k = j + 1;
                    if matches!(at(k), Some('+') | Some('-')) {
                        k += 1;
                    }
                    if at(k).is_some_and(|d| d.is_ascii_digit()) {
                        while at(k).is_some_and(|d| d.is_ascii_digit()) {
                            k += 1;
                        }
                        j = k;
                    }
                }
                // `1abc` is an identifier in MySQL; keep it simple: digits followed by letters form a word.
                if at(j).is_some_and(|ch| ch.is_alphabetic() || ch == '_') && !seen_dot {
                    while at(j).is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
                        j += 1;
                    }
                    let text: String = chars[i..j].iter().map(|c| c.1).collect();
                    (Tok::Word(text), j - i)
                } else {
                    let text: String = chars[i..j].iter().map(|c| c.1).collect();
                    (Tok::Number(text), j - i)
                }
            }
            w if w.is_alphabetic() || w == '_' || w == '$' => {
                let mut j = i;
                while at(j).is_some_and(|ch| ch.is_alphanumeric() || ch == '_' || ch == '$') {
                    j += 1;
                }
                let text: String = chars[i..j].iter().map(|c| c.1).collect();
                (Tok::Word(text), j - i)
            }
            other => single(Tok::Other(other)),
        };
        let end = off(i + len);
        out.push(Token { tok, start, end });
        i += len;
    }
    out.push(Token {
        tok: Tok::Eof,
        start: sql.len(),
        end: sql.len(),
    });
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).unwrap().into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn basic_tokens() {
        assert_eq!(
            toks("SELECT `a b`, 'x''y', \"q\\\"\" FROM t@incr # c\n-- d\n/* e */;"),
            vec![
                Tok::Word("SELECT".into()),
                Tok::Quoted("a b".into()),
                Tok::Comma,
                Tok::Str("x'y".into()),
                Tok::Comma,
                Tok::Str("q\"".into()),
                Tok::Word("FROM".into()),
                Tok::Word("t".into()),
                Tok::At,
                Tok::Word("incr".into()),
                Tok::Semi,
                Tok::Eof
            ]
        );
        assert_eq!(
            toks("1.5 .5 1e3 <> <= >= != @@x"),
            vec![
                Tok::Number("1.5".into()),
                Tok::Number(".5".into()),
                Tok::Number("1e3".into()),
                Tok::Ne,
                Tok::Le,
                Tok::Ge,
                Tok::Ne,
                Tok::AtAt,
                Tok::Word("x".into()),
                Tok::Eof
            ]
        );
        assert!(tokenize("'abc").is_err());
        assert!(tokenize("/* abc").is_err());
        assert!(tokenize("`abc").is_err());
    }
}
