"""A model-token estimate that does not undercount (design §2.2: the context budget).

No tokenizer here: a vocabulary is megabytes (and most libraries download theirs on first use),
and the models of one room use different ones. Instead, the text is cut into the pieces every
byte-level BPE tokenizer we know cuts it into at least (its pre-tokenizer splits words from
numbers, punctuation and white space, and a word at its case changes), and each piece is
charged what such a tokenizer could need for it at most on real text:

* a word: 2 tokens up to 4 letters (a short word the vocabulary lacks is two pieces: "moto",
  "acme"), else one per 3 letters or part of them and one more (a long or rare word is cut in
  pieces; "Pneumonoultramicroscopic" is many); a word in capitals one per letter
  (capitals are cut finer than any other word: "ASL" is two, "PITR" three);
* a run of digits: one token per 2 digits (tokenizers cut numbers in groups of 1 to 3);
* a run of white space: a single space or line break is charged 1 (it usually rides on the next
  word: the charge is slack); longer runs one per 4 characters (indentation);
* every other ASCII character (punctuation, control characters): 1;
* every other character: its UTF-8 bytes (a byte-level tokenizer never needs more tokens than
  bytes: CJK and emoji are charged 3 to 4 each, and an emoji sequence all its code points).

Held against a real BPE tokenizer (OpenAI's cl100k, in the tests: tests/unit/test_tokens.py)
on English, code, CJK, emoji and control characters, the estimate is never below it and within
2.5x of it on English prose (about 2.4x on this repository's docs). It is an estimate for fitting
a prompt, not a bill: the cost line counts the tokens the provider reports (design §10).
"""

from __future__ import annotations

import re

#: A word at its case changes (``getUserById`` → get, User, By, Id; ``HTTPServer`` → HTTP,
#: Server), a run of digits, a run of white space, one ASCII character, one other character.
_PIECES = re.compile(r" ?(?:[A-Z]?[a-z]+|[A-Z]+(?![a-z]))|[0-9]+|[ \t]+|\r\n|\n|\r|[\x00-\x7f]|[^\x00-\x7f]")


#: A consonant run longer than 3 letters (``y`` counts as a vowel).
_CLUSTER = re.compile(r"[^aeiouyAEIOUY]{4,}")


def _PRONOUNCEABLE(word: str) -> bool:
    vowels = sum(c in "aeiouyAEIOUY" for c in word)
    return 3 * vowels >= len(word) and _CLUSTER.search(word) is None


def _cost(piece: str) -> int:
    if len(piece) > 1 and piece[0] == " " and piece[1].isalpha():
        piece = piece[1:]  # a word takes the space before it along (free: the word pays)
    first = piece[0]
    n = len(piece)
    if first.isascii():
        if first.isalpha():
            if n <= 2:
                return n
            if piece.isupper():  # an acronym: capitals are cut fine ("ASL": "AS", "L"; "PITR" three)
                return n
            if _PRONOUNCEABLE(piece):
                # a short word outside the vocabulary is two pieces ("moto", "acme", "quay")
                return 2 if n <= 4 else (n + 2) // 3 + 1
            return n // 2 + 2
        if first.isdigit():
            return (n + 1) // 2
        if first in " \t":
            return 1 if n == 1 else (n + 3) // 4
        return 1  # a line break, punctuation, a control character
    return len(piece.encode("utf-8", "surrogatepass"))


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` may take at most, for any model we know of (see the module docstring)."""
    return sum(_cost(p) for p in _PIECES.findall(text))


#: The cap on a reply's tokens every model request asks for (``ModelCall.max_tokens``): the
#: context budget keeps it free (design §2.2).
REPLY_MAX_TOKENS = 2048
