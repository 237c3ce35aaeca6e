//! SQL text sent to an FE over MySQL: identifiers and string literals quoted one way.

/// A quoted identifier: `` `name` ``, a backtick inside doubled.
pub fn quote_ident(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A single-quoted string literal, backslash and quote escaped (MySQL's default `sql_mode`,
/// which Doris follows).
pub fn string_literal(value: &str) -> String {
    format!("'{}'", value.replace('\\', "\\\\").replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_cannot_be_closed_from_inside() {
        assert_eq!(quote_ident("a`b"), "`a``b`");
        assert_eq!(string_literal(r"it's \ "), r"'it''s \\ '");
    }
}
