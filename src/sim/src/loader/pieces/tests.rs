use super::*;
use crate::loader::LoadError;
use crate::loader::fixtures::{DEPLOYMENT, GROUP, NODE, POD, SLICE};

/// A text handed over `size` bytes at a time.
struct Text {
    text: Vec<u8>,
    size: usize,
    at: usize,
}

impl Text {
    fn new(text: impl Into<Vec<u8>>, size: usize) -> Self {
        Self {
            text: text.into(),
            size,
            at: 0,
        }
    }
}

impl Pieces for Text {
    fn read_more(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<usize> {
        let end = (self.at + self.size).min(self.text.len());
        buffer.extend_from_slice(&self.text[self.at..end]);
        let read = end - self.at;
        self.at = end;
        Ok(read)
    }
}

fn loader(threads: usize) -> Loader {
    let mut loader = Loader::new();
    loader.keep_kind("dra-autoscaler.io", "NodeGroup");
    loader.trim_unread();
    loader.type_on_threads(threads);
    loader
}

/// What [`Loader::add_json`] makes of the text.
fn whole(text: &str, threads: usize) -> Result<String, LoadError> {
    let mut loader = loader(threads);
    loader.add_json("t.json", text)?;
    Ok(format!("{:?}", loader.finish()))
}

/// What the pieces make of it, `None` when they leave it to the whole text.
fn in_pieces(text: &[u8], size: usize, threads: usize) -> Option<String> {
    let mut loader = loader(threads);
    let taken = loader
        .add_json_in_pieces("t.json", &mut Text::new(text, size))
        .unwrap();
    if !taken {
        assert!(
            loader.is_fresh(),
            "a text left to the whole path left objects"
        );
        return None;
    }
    Some(format!("{:?}", loader.finish()))
}

/// Piece sizes down to one byte, so that every token is cut somewhere.
const SIZES: [usize; 5] = [1, 2, 7, 64, 1 << 20];

#[test]
fn lists_read_in_pieces_load_what_the_whole_text_does() {
    let texts = [
        // As kubectl prints it: `items` before `kind`, a duplicate node.
        format!(
            "{{\n    \"apiVersion\": \"v1\",\n    \"items\": [\n        {NODE},\n        {POD},\n        {GROUP},\n        {DEPLOYMENT},\n        {SLICE},\n        {NODE}\n    ],\n    \"kind\": \"List\",\n    \"metadata\": {{\n        \"resourceVersion\": \"\"\n    }}\n}}\n"
        ),
        format!(r#"{{"kind":"NodeList","apiVersion":"v1","items":[{NODE}]}}"#),
        // An escaped key, numbers and literals around the items.
        format!(r#" {{"n":-1.5e3,"b":true,"z":null,"it\u0065ms":[{POD}, {NODE}],"kind":"List"}} "#),
        r#"{"kind":"List","items":[]}"#.to_string(),
        // `kind` twice: the last counts, as in a parsed value.
        format!(r#"{{"kind":"Node","items":[{NODE}],"kind":"List"}}"#),
    ];
    for text in &texts {
        let expected = whole(text, 1).unwrap();
        for size in SIZES {
            assert_eq!(
                in_pieces(text.as_bytes(), size, 1),
                Some(expected.clone()),
                "{size} {text}"
            );
        }
    }
    assert!(whole(&texts[0], 1).unwrap().contains("Node n1"));
}

#[test]
fn many_items_on_two_threads_load_as_the_whole_text_does_on_one() {
    // Enough items per piece to be typed on the helper too, and names repeating so that
    // duplicates fall in other pieces than their first.
    let items: Vec<String> = (0..3000)
        .map(|i| match i % 3 {
            0 => NODE.replace("\"n1\"", &format!("\"n{}\"", i % 1500)),
            1 => POD.replace("\"p\"", &format!("\"p{i}\"")),
            _ => SLICE.replace("\"s\"", &format!("\"s{i}\"")),
        })
        .collect();
    let text = format!(
        r#"{{"apiVersion":"v1","items":[{}],"kind":"List"}}"#,
        items.join(",\n")
    );
    let expected = whole(&text, 1).unwrap();
    assert!(expected.contains("Node n3"), "duplicates expected");
    for size in [4096, 100_000, 1 << 24] {
        assert_eq!(
            in_pieces(text.as_bytes(), size, 2),
            Some(expected.clone()),
            "{size}"
        );
    }
}

#[test]
fn other_texts_are_left_to_the_whole_text_and_load_as_before() {
    let bad = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n2"},"spec":{"unschedulable":"maybe"}}"#;
    let texts = [
        // Not valid JSON: a trailing comma in the items or the object, a second value,
        // a cut text, a bad number in another member.
        format!(r#"{{"kind":"List","items":[{NODE},]}}"#),
        format!(r#"{{"kind":"List","items":[{NODE}],}}"#),
        format!(r#"{{"kind":"List","items":[{NODE}]}} {{}}"#),
        format!(r#"{{"kind":"List","items":[{NODE}]"#),
        format!(r#"{{"kind":"List","x":01,"items":[{NODE}]}}"#),
        format!(r#"{{"kind":"List","items":[{NODE} {POD}]}}"#),
        // Not lists: one object, a kind that is no list, items that are no array or twice.
        NODE.to_string(),
        format!(
            r#"{{"kind":"Thing","apiVersion":"x/v1","metadata":{{"name":"t"}},"items":[{NODE}]}}"#
        ),
        r#"{"kind":"List","items":{"a":1}}"#.to_string(),
        format!(r#"{{"kind":"List","items":[{NODE}],"items":[{POD}]}}"#),
        "[1, 2]".to_string(),
        // Known only after its items were typed: the kind is no list's.
        format!(
            r#"{{"items":[{NODE},{POD}],"kind":"Thing","apiVersion":"x/v1","metadata":{{"name":"t"}}}}"#
        ),
        String::new(),
        "  \n".to_string(),
        // Items that do not load: the first bad one is the error, as for the whole text.
        format!(r#"{{"items":[{NODE},{bad},{POD},"oops"],"kind":"List"}}"#),
        format!(r#"{{"items":[{NODE},"oops"],"kind":"List"}}"#),
        format!(
            r#"{{"items":[{NODE},{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"x"}},}}],"kind":"List"}}"#
        ),
    ];
    for text in &texts {
        for size in SIZES {
            assert_eq!(in_pieces(text.as_bytes(), size, 1), None, "{size} {text}");
        }
    }
    // What the whole path makes of them is unchanged: errors for the invalid ones, the
    // single objects and empty texts loaded.
    assert!(whole(&texts[0], 1).is_err());
    assert!(whole(&texts[6], 1).unwrap().contains("n1"));
    assert_eq!(whole(&texts[14], 1).unwrap_err().origin.item, Some(1));
    assert!(whole(&texts[11], 1).unwrap().contains("Thing"));
}

#[test]
fn text_that_is_not_utf8_is_left_to_the_whole_text() {
    let text = format!(r#"{{"kind":"List","items":[{NODE}]}}"#).replace("\"b\"", "\"\u{e9}\"");
    let mut bytes = text.into_bytes();
    let at = bytes.iter().position(|&b| b == 0xc3).unwrap();
    bytes[at] = 0xff;
    for size in SIZES {
        assert_eq!(in_pieces(&bytes, size, 1), None, "{size}");
    }
}

#[test]
fn a_loader_holding_objects_is_left_alone() {
    let text = format!(r#"{{"kind":"List","items":[{NODE}]}}"#);
    let mut holding = loader(1);
    holding.add_json("a.json", POD).unwrap();
    let before = format!("{:?}", holding.loaded);
    let mut pieces = Text::new(text, 64);
    assert!(!holding.add_json_in_pieces("t.json", &mut pieces).unwrap());
    assert_eq!(format!("{:?}", holding.loaded), before);
    assert_eq!(pieces.at, 0, "nothing was read");
}

#[test]
fn items_nested_deeper_than_the_whole_text_allows_are_left_to_it() {
    // The whole text's reading skips the items (serde_json skips a value without a depth
    // limit) and reads each from its own text, where serde_json parses 127 levels into a
    // value: an item of a kind read that way (here skipped) nested 128 deep fails there,
    // and must here too.
    let deep = |levels: usize| {
        let item = DEPLOYMENT.replacen(
            '{',
            &format!(
                "{{\"deep\":{}0{},",
                "[".repeat(levels - 1),
                "]".repeat(levels - 1)
            ),
            1,
        );
        format!(r#"{{"kind":"List","items":[{NODE},{item}]}}"#)
    };
    let fits = deep(127);
    let loaded = whole(&fits, 1).unwrap();
    let too_deep = deep(128);
    let error = whole(&too_deep, 1).unwrap_err();
    assert!(error.message.contains("recursion limit"), "{error}");
    for size in SIZES {
        assert_eq!(in_pieces(fits.as_bytes(), size, 1), Some(loaded.clone()));
        assert_eq!(in_pieces(too_deep.as_bytes(), size, 1), None, "{size}");
    }
}

#[test]
fn a_failed_read_is_the_error() {
    struct Failing;
    impl Pieces for Failing {
        fn read_more(&mut self, _: &mut Vec<u8>) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk gone"))
        }
    }
    let error = loader(1)
        .add_json_in_pieces("t.json", &mut Failing)
        .unwrap_err();
    assert_eq!(error.to_string(), "disk gone");

    // Failing after some items were typed: the loader is left as it was.
    struct Midway(Text);
    impl Pieces for Midway {
        fn read_more(&mut self, buffer: &mut Vec<u8>) -> std::io::Result<usize> {
            if self.0.at > self.0.text.len() / 2 {
                return Err(std::io::Error::other("disk gone"));
            }
            self.0.read_more(buffer)
        }
    }
    let items = vec![NODE; 20].join(",").replace("\"n1\"", "\"n\"");
    let text = format!(r#"{{"kind":"List","items":[{items}]}}"#);
    let mut midway = Midway(Text::new(text, 64));
    let mut fresh = loader(1);
    let error = fresh.add_json_in_pieces("t.json", &mut midway).unwrap_err();
    assert_eq!(error.to_string(), "disk gone");
    assert!(fresh.is_fresh());
}
