//! SQL text sent to an FE over MySQL: identifiers and string literals quoted one way.

/// A quoted identifier: `` `name` ``, a backtick inside doubled. The rule lives in `dcs-crds`,
/// whose `TableRef::quoted` applies it too (that crate cannot depend on this one).
pub use dcs_crds::spec::quote_ident;

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
