//! The one analyzer of indexed text and of queries: jieba splits Chinese into words (and
//! passes runs of Latin letters and digits through whole), then Latin words are lowercased
//! and stemmed, so "derivatives" finds "derivative" and "加速度" finds 加速度.

use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, TextAnalyzer, Token, TokenFilter, TokenStream,
    Tokenizer,
};
use tantivy_jieba::JiebaTokenizer;

/// The name the analyzer is registered under in every KB index.
pub(crate) const ANALYZER: &str = "kb_text";

/// Tokens longer than this (bytes) are noise — base64, hashes, URLs — not words.
const LONGEST_TOKEN: usize = 40;

pub(crate) fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(JiebaTokenizer::new())
        .filter(WordsOnly)
        .filter(RemoveLongFilter::limit(LONGEST_TOKEN))
        .filter(LowerCaser)
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The distinct terms of a text, in first-seen order (how a query is turned into terms).
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut analyzer = analyzer();
    let mut stream = analyzer.token_stream(text);
    let mut out: Vec<String> = Vec::new();
    while stream.advance() {
        let term = &stream.token().text;
        if !out.iter().any(|t| t == term) {
            out.push(term.clone());
        }
    }
    out
}

/// Drops the whitespace and punctuation tokens jieba emits between words: they would only
/// match every passage.
#[derive(Clone, Copy)]
pub(crate) struct WordsOnly;

impl TokenFilter for WordsOnly {
    type Tokenizer<T: Tokenizer> = WordsOnlyTokenizer<T>;

    fn transform<T: Tokenizer>(self, tokenizer: T) -> WordsOnlyTokenizer<T> {
        WordsOnlyTokenizer(tokenizer)
    }
}

#[derive(Clone)]
pub(crate) struct WordsOnlyTokenizer<T>(T);

impl<T: Tokenizer> Tokenizer for WordsOnlyTokenizer<T> {
    type TokenStream<'a> = WordsOnlyStream<T::TokenStream<'a>>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> Self::TokenStream<'a> {
        WordsOnlyStream(self.0.token_stream(text))
    }
}

pub(crate) struct WordsOnlyStream<S>(S);

impl<S: TokenStream> TokenStream for WordsOnlyStream<S> {
    fn advance(&mut self) -> bool {
        while self.0.advance() {
            if self.0.token().text.chars().any(char::is_alphanumeric) {
                return true;
            }
        }
        false
    }

    fn token(&self) -> &Token {
        self.0.token()
    }

    fn token_mut(&mut self) -> &mut Token {
        self.0.token_mut()
    }
}

#[cfg(test)]
mod tests {
    use super::terms;

    #[test]
    fn english_is_lowercased_and_stemmed_and_punctuation_dropped() {
        assert_eq!(terms("Derivatives, measuring!"), ["deriv", "measur"]);
    }

    #[test]
    fn chinese_is_split_into_words() {
        let t = terms("牛顿第二定律描述了力与加速度的关系。");
        assert!(t.iter().any(|w| w == "加速度"), "{t:?}");
        assert!(!t.iter().any(|w| w == "。"), "{t:?}");
    }
}
