"""The benchmark text mix: a fixed list of texts in three kinds, drawn by a seeded RNG.

    mix = TextMix(seed=0)          # weights: short 0.4, medium 0.4, long 0.2
    kind, text = mix.draw()

Kinds model a voice agent's traffic: short replies (3-8 words, one sentence), medium sentences
(12-25 words) and long paragraphs (3-5 sentences). Texts are fixed so that two runs with the same
seed send exactly the same requests in the same order.
"""

import random

SHORT = (
    "Sure, I can do that.",
    "Okay, give me a second.",
    "Yes, that works for me.",
    "Sorry, could you repeat that?",
    "Your order has shipped.",
    "Let me check on that for you.",
    "Thanks, see you tomorrow!",
    "The meeting starts at noon.",
    "No problem at all.",
    "I found three matching results.",
)

MEDIUM = (
    "The quick brown fox jumps over the lazy dog while the farmer watches from behind the old red barn.",
    "Could you tell me the way to the train station, and whether the last train leaves before midnight?",
    "Our meeting has moved to three thirty on Thursday afternoon, so please update your calendar.",
    "The total for your order comes to forty two dollars and fifteen cents, including shipping.",
    "Turn left at the next light, then keep going straight for about two miles until you see the bridge.",
    "I have booked a table for four people at the Italian restaurant near the park at seven tonight.",
    "Please remember to water the plants and feed the cat every morning while I am away on holiday.",
    "The weather service expects heavy rain this evening, with strong winds along the northern coast.",
    "Your package was delivered to the front desk at ten past two and signed for by the receptionist.",
    "If the printer keeps jamming, open the side panel and gently pull out any paper that is stuck.",
)

LONG = (
    "Thank you for calling the support line. I can see that your internet connection dropped twice "
    "this morning. I have reset the line from our side, which usually fixes the problem. Please "
    "restart your router and wait about two minutes. If the light is still red after that, call us back.",
    "Here is a quick summary of today's news. Markets opened higher after the central bank kept rates "
    "unchanged. A new bridge across the river will open to traffic next month. In sports, the home team "
    "won its third game in a row.",
    "To reset your password, open the settings page and choose the security tab. Click the link that "
    "says forgot password. We will send a code to the phone number on your account. Enter the code, "
    "then pick a new password with at least twelve characters.",
    "The museum is open from nine in the morning until six in the evening. Tickets cost fifteen dollars "
    "for adults and are free for children under twelve. Guided tours start every hour from the main hall.",
    "Let me walk you through the recipe. First, heat the oven to two hundred degrees. Mix the flour, "
    "sugar and butter until the dough is smooth. Bake for twenty five minutes, then let it cool before "
    "you cut it.",
)

KINDS = {"short": SHORT, "medium": MEDIUM, "long": LONG}
DEFAULT_WEIGHTS = {"short": 0.4, "medium": 0.4, "long": 0.2}


class TextMix:
    """Seeded draws from the fixed lists; `weights` maps a kind to its probability (need not sum to 1)."""

    def __init__(self, seed: int = 0, weights: dict | None = None):
        self.seed = seed
        self.weights = dict(weights or DEFAULT_WEIGHTS)
        unknown = set(self.weights) - set(KINDS)
        if unknown or not any(w > 0 for w in self.weights.values()):
            raise ValueError(f"weights must give kinds among {sorted(KINDS)} a positive total, got {self.weights}")
        self._rng = random.Random(self.seed)

    def draw(self) -> tuple[str, str]:
        """One (kind, text)."""
        kinds = list(self.weights)
        kind = self._rng.choices(kinds, weights=[self.weights[k] for k in kinds])[0]
        return kind, self._rng.choice(KINDS[kind])


def parse_weights(spec: str) -> dict:
    """`"short=0.4,medium=0.4,long=0.2"` -> dict (the `--mix` flag)."""
    out = {}
    for part in spec.split(","):
        name, _, value = part.partition("=")
        if name.strip() not in KINDS:
            raise ValueError(f"unknown text kind {name!r} in --mix; use {', '.join(KINDS)}")
        out[name.strip()] = float(value)
    return out


def _sentence(s: str) -> str:
    s = s.strip()
    return s if s.endswith((".", "!", "?")) else s + "."


def long_text(seed: int, min_chars: int) -> str:
    """One long text for a paced stream: whole sentences of the medium and long lists in a seeded order,
    joined until at least `min_chars` characters (the default voice speaks ~18 characters a second: 539
    characters gave 29.8 s of audio). The same seed gives the same text."""
    rng = random.Random(seed)
    pool = [_sentence(s) for s in MEDIUM] + [_sentence(s) for t in LONG for s in t.split(". ")]
    parts, n = [], 0
    while n < min_chars:
        rng.shuffle(pool)
        for s in pool:
            parts.append(s)
            n += len(s) + 1
            if n >= min_chars:
                break
    return " ".join(parts)
