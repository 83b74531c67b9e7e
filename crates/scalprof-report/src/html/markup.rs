//! HTML that is escaped by construction.
//!
//! Markup enters an [`Html`] only as string literals (`&'static str`, through `+=` or the
//! format string of [`html!`]/[`markup!`]) or as another `Html`; every other value given
//! to those macros is rendered through [`Render`], which escapes text and passes numbers
//! through. There is no way to append a runtime `String` unescaped, so a forgotten escape
//! cannot happen: the profiled program's symbols, lock names and paths are text.
//!
//! A few dozen lines in the manner of `quick_xml::Writer`; a template engine (maud,
//! askama) would mean rewriting every view in its syntax for the same guarantee.

use std::fmt;
use std::ops::AddAssign;

/// A fragment or page of HTML, every piece of it either a literal or escaped text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Html(String);

impl Html {
    pub fn new() -> Self {
        Self::default()
    }

    /// The finished page or fragment.
    pub fn into_string(self) -> String {
        self.0
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Appends text, escaped.
    pub fn text(&mut self, text: &str) {
        escape_into(&mut self.0, text);
    }

    /// Fragments joined by a literal separator.
    pub fn join<I: IntoIterator<Item = Html>>(parts: I, sep: &'static str) -> Html {
        let mut out = Html::new();
        for (i, p) in parts.into_iter().enumerate() {
            if i > 0 {
                out.0.push_str(sep);
            }
            out.0.push_str(&p.0);
        }
        out
    }

    /// Used by [`html!`] only: the arguments are already wrapped in [`Esc`].
    #[doc(hidden)]
    pub fn __push_args(&mut self, args: fmt::Arguments<'_>) {
        let _ = fmt::Write::write_fmt(&mut self.0, args);
    }
}

impl AddAssign<&'static str> for Html {
    fn add_assign(&mut self, markup: &'static str) {
        self.0.push_str(markup);
    }
}

impl AddAssign<&Html> for Html {
    fn add_assign(&mut self, other: &Html) {
        self.0.push_str(&other.0);
    }
}

impl AddAssign<Html> for Html {
    fn add_assign(&mut self, other: Html) {
        self.0.push_str(&other.0);
    }
}

/// How a value given to [`html!`] is written: text escaped, numbers as they are (with
/// the format string's precision), markup unchanged.
pub trait Render {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result;
}

/// A value on its way into HTML (what [`html!`] wraps each argument in).
#[doc(hidden)]
pub struct Esc<'a, T: ?Sized>(pub &'a T);

impl<T: Render + ?Sized> fmt::Display for Esc<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.render(f)
    }
}

impl Render for Html {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Render for str {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut s = String::with_capacity(self.len());
        escape_into(&mut s, self);
        f.write_str(&s)
    }
}

impl Render for String {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_str().render(f)
    }
}

impl Render for std::borrow::Cow<'_, str> {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.as_ref().render(f)
    }
}

impl Render for fmt::Arguments<'_> {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.to_string().render(f)
    }
}

impl<T: Render + ?Sized> Render for &T {
    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        (**self).render(f)
    }
}

/// Numbers never hold a character that HTML gives a meaning to.
macro_rules! numbers {
    ($($t:ty),*) => {$(
        impl Render for $t {
            fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(self, f)
            }
        }
    )*};
}
numbers!(u8, u16, u32, u64, usize, i8, i16, i32, i64, isize, f32, f64);

/// Text in the page: escaped as all of scalprof's markup is ([`crate::safe::markup_text`]).
fn escape_into(out: &mut String, s: &str) {
    crate::safe::markup_text_into(out, s);
}

/// Appends to an [`Html`]: the format string is markup, every argument is rendered
/// through [`Render`] (text escaped). Arguments are positional only: a name captured
/// inside the format string would skip the escaping, and a test refuses one.
macro_rules! html {
    ($h:expr, $fmt:literal $(, $arg:expr)* $(,)?) => {
        $h.__push_args(format_args!($fmt $(, $crate::html::markup::Esc(&$arg))*))
    };
}

/// A new [`Html`] fragment, as [`html!`] writes it.
macro_rules! markup {
    ($fmt:literal $(, $arg:expr)* $(,)?) => {{
        let mut h = $crate::html::markup::Html::new();
        $crate::html::markup::html!(h, $fmt $(, $arg)*);
        h
    }};
}

pub(crate) use {html, markup};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_numbers_and_markup_are_not() {
        let name = String::from("<script>\"a\" & 'b'</script>");
        let inner = markup!("<b>{}</b>", name.as_str());
        let mut h = Html::new();
        h += "<p>";
        html!(h, "{} {:.2} {} {}", inner, 1.23456_f64, 42u64, &name);
        h += "</p>";
        assert_eq!(
            h.into_string(),
            "<p><b>&lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;</b> 1.23 42 \
             &lt;script&gt;&quot;a&quot; &amp; &#39;b&#39;&lt;/script&gt;</p>"
        );
    }

    #[test]
    fn text_holds_only_characters_xml_allows() {
        let hostile = crate::safe::HOSTILE;
        let h = markup!("<p title=\"{}\">{}</p>", hostile, hostile).into_string();
        crate::safe::assert_well_formed(&h);
        assert!(h.contains("a\\u{ffff}b"), "{h}");
    }

    #[test]
    fn fragments_join_with_a_literal_separator() {
        let parts = ["a<", "b"].into_iter().map(|s| markup!("<i>{}</i>", s));
        assert_eq!(
            Html::join(parts, ", ").into_string(),
            "<i>a&lt;</i>, <i>b</i>"
        );
    }

    /// The one way around the escaping is a name captured in a format string (`{name}`
    /// in the literal formats `name` directly): the views never do it.
    #[test]
    fn no_view_captures_a_name_in_a_format_string() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut files = vec![dir.join("html.rs"), dir.join("suite.rs")];
        for e in std::fs::read_dir(dir.join("html")).unwrap() {
            files.push(e.unwrap().path());
        }
        for path in files {
            let src = std::fs::read_to_string(&path).unwrap();
            for (at, _) in src
                .match_indices("html!(")
                .chain(src.match_indices("markup!("))
            {
                let rest = &src[at..];
                let Some(open) = rest.find('"') else { continue };
                if rest[..open].contains(';') {
                    continue; // not a call: the macros' own definitions
                }
                let lit = &rest[open + 1..];
                let mut end = 0;
                let b = lit.as_bytes();
                while end < b.len() && b[end] != b'"' {
                    end += if b[end] == b'\\' { 2 } else { 1 };
                }
                let lit = &lit[..end.min(lit.len())];
                let (b, mut i, mut captured) = (lit.as_bytes(), 0, false);
                while i + 1 < b.len() {
                    if b[i] == b'{' && b[i + 1] == b'{' {
                        i += 2;
                        continue;
                    }
                    captured |=
                        b[i] == b'{' && (b[i + 1].is_ascii_alphabetic() || b[i + 1] == b'_');
                    i += 1;
                }
                assert!(
                    !captured,
                    "{}: a name captured in `{lit}` would not be escaped",
                    path.display()
                );
            }
        }
    }
}
