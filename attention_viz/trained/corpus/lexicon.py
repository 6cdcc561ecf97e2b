"""The lexicon: word classes, word lists and the morphology that spells every form.

Each list is a small table (English, French, gender or nothing); plurals, conjugations and
adjective endings follow regular rules plus a few listed exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    gender: Literal["m", "f"]
    agent: bool  # may be the subject of a transitive verb / the agent of a passive


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str]  # French masc sg, fem sg, masc pl, fem pl

    def fr(self, gender: str, plural: bool) -> str:
        return self.forms[(gender == "f") + 2 * plural]


@dataclass(frozen=True)
class Verb:
    en: str  # base form: "sign"
    en_3sg: str  # "signs"
    en_past: str  # "signed"
    en_pp: str  # "signed"
    fr_present: tuple[str, str]  # 3rd person singular, plural: "signe", "signent"
    fr_future: tuple[str, str]  # "signera", "signeront"
    fr_pp: str  # masculine singular past participle: "signé"
    transitive: bool

    def fr_participle(self, gender: str, plural: bool) -> str:
        return self.fr_pp + ("e" if gender == "f" else "") + ("s" if plural else "")


# One noun per line: English, French, gender.  Plurals follow the rules in _en_plural/_fr_plural.
_AGENT_NOUNS = """
council conseil m | commission commission f | parliament parlement m | government gouvernement m
minister ministre m | committee comité m | union union f | country pays m | state état m
bank banque f | company entreprise f | court cour f | president président m | citizen citoyen m
worker travailleur m | farmer agriculteur m | delegation délégation f | agency agence f
authority autorité f | region région f | city ville f | producer producteur m
consumer consommateur m | organisation organisation f | institution institution f
administration administration f | group groupe m | party parti m | member membre m
expert expert m | judge juge m | employer employeur m | partner partenaire m
association association f | university université f | family famille f | industry industrie f
"""
_THING_NOUNS = """
treaty traité m | law loi f | report rapport m | proposal proposition f | agreement accord m
budget budget m | directive directive f | regulation règlement m | policy politique f
programme programme m | area zone f | market marché m | price prix m | tax taxe f
reform réforme f | decision décision f | strategy stratégie f | project projet m | plan plan m
measure mesure f | resolution résolution f | amendment amendement m | text texte m
document document m | system système m | network réseau m | contract contrat m | debate débat m
crisis crise f | sector secteur m | economy économie f | product produit m | service service m
standard norme f | right droit m | rule règle f | method méthode f | objective objectif m
initiative initiative f | procedure procédure f | convention convention f
declaration déclaration f | investment investissement m | loan prêt m | debt dette f
currency monnaie f | border frontière f | road route f | port port m | hospital hôpital m
summit sommet m | meeting réunion f | conference conférence f | negotiation négociation f
election élection f | energy énergie f | water eau f | job emploi m | contribution contribution f
subsidy subvention f | salary salaire m | pension pension f | tariff tarif m | quota quota m
sanction sanction f | framework cadre m | principle principe m | question question f
problem problème m | solution solution f | risk risque m | cost coût m | rate taux m
survey enquête f
"""
_EN_IRREGULAR_PLURALS = {"crisis": "crises"}

# English, French masculine singular; the other French forms follow _fr_adjective_forms.
_ADJECTIVES = """
european européen | economic économique | social social | national national
political politique | public public | financial financier | agricultural agricole
industrial industriel | regional régional | local local | international international
environmental environnemental | commercial commercial | legal juridique | fiscal fiscal
monetary monétaire | military militaire | democratic démocratique | important important
necessary nécessaire | significant significatif | recent récent | current actuel
official officiel | annual annuel | common commun | general général | special spécial
technical technique | scientific scientifique | digital numérique | cultural culturel
rural rural | urban urbain | foreign étranger | german allemand | french français
british britannique | italian italien | spanish espagnol | strategic stratégique
medical médical | efficient efficace | competitive compétitif | sustainable durable
transparent transparent | independent indépendant | complex complexe | modern moderne
active actif | global mondial | federal fédéral | central central | private privé
"""
_FR_IRREGULAR_ADJECTIVES = {"public": ("public", "publique", "publics", "publiques")}

# English base form, French infinitive.
_TRANSITIVE_VERBS = """
sign signer | adopt adopter | approve approuver | propose proposer | examine examiner
fund financer | reject rejeter | present présenter | publish publier | protect protéger
create créer | modify modifier | accept accepter | prepare préparer | criticise critiquer
improve améliorer | defend défendre | confirm confirmer | develop développer
negotiate négocier | respect respecter | organise organiser | launch lancer | study étudier
simplify simplifier | support soutenir | establish établir | choose choisir | reduce réduire
build construire | draft rédiger
"""
_INTRANSITIVE_VERBS = """
vote voter | protest protester | hesitate hésiter | cooperate coopérer | insist insister
react réagir | succeed réussir | fail échouer | progress progresser | work travailler
rise augmenter | fall baisser | participate participer
"""
_EN_IRREGULAR_VERBS = {  # base: (past, past participle)
    "rise": ("rose", "risen"),
    "fall": ("fell", "fallen"),
    "choose": ("chose", "chosen"),
    "build": ("built", "built"),
}
_FR_IRREGULAR_VERBS = {  # infinitive: ((present sg, pl), (future sg, pl), participle)
    "rejeter": (("rejette", "rejettent"), ("rejettera", "rejetteront"), "rejeté"),
    "protéger": (("protège", "protègent"), ("protégera", "protégeront"), "protégé"),
    "coopérer": (("coopère", "coopèrent"), ("coopérera", "coopéreront"), "coopéré"),
    "défendre": (("défend", "défendent"), ("défendra", "défendront"), "défendu"),
    "soutenir": (("soutient", "soutiennent"), ("soutiendra", "soutiendront"), "soutenu"),
    "réduire": (("réduit", "réduisent"), ("réduira", "réduiront"), "réduit"),
    "construire": (("construit", "construisent"), ("construira", "construiront"), "construit"),
}

MONTHS: tuple[tuple[str, str], ...] = (
    ("january", "janvier"), ("february", "février"), ("march", "mars"), ("april", "avril"),
    ("may", "mai"), ("june", "juin"), ("july", "juillet"), ("august", "août"),
    ("september", "septembre"), ("october", "octobre"), ("november", "novembre"),
    ("december", "décembre"),
)  # fmt: skip
DAYS = range(1, 29)
YEARS = range(1990, 2025)
COUNTS = range(2, 13)  # "3 reports": kept apart from days/years only by position, never "in 3"

# English preposition (one or two words) -> French words, each with the index of the English
# word it is aligned to.  Dates ("on 12 may 1998", "in 1998") are handled separately.
PREPOSITIONS: dict[str, tuple[tuple[str, int], ...]] = {
    "in": (("dans", 0),),
    "for": (("pour", 0),),
    "with": (("avec", 0),),
    "at": (("à", 0),),
    "on": (("sur", 0),),
    "against": (("contre", 0),),
    "without": (("sans", 0),),
    "after": (("après", 0),),
    "before": (("avant", 0),),
    "during": (("pendant", 0),),
    "within": (("au", 0), ("sein", 0), ("de", 0)),
    "because of": (("à", 0), ("cause", 0), ("de", 1)),
}


def _entries(table: str) -> list[list[str]]:
    return [entry.split() for entry in table.replace("\n", " | ").split("|") if entry.strip()]


def _en_plural(word: str) -> str:
    if word in _EN_IRREGULAR_PLURALS:
        return _EN_IRREGULAR_PLURALS[word]
    if word.endswith("y") and word[-2] not in "aeiou":
        return word[:-1] + "ies"
    if word.endswith(("s", "x", "z", "ch", "sh")):
        return word + "es"
    return word + "s"


def _fr_plural(word: str) -> str:
    if word.endswith(("s", "x", "z")):
        return word
    if word.endswith(("eau", "eu")):
        return word + "x"
    if word.endswith("al"):
        return word[:-2] + "aux"
    return word + "s"


def _fr_adjective_forms(ms: str) -> tuple[str, str, str, str]:
    if ms in _FR_IRREGULAR_ADJECTIVES:
        return _FR_IRREGULAR_ADJECTIVES[ms]
    if ms.endswith("e"):
        fs = ms
    elif ms.endswith(("en", "el")):
        fs = ms + ms[-1] + "e"  # européenne, officielle
    elif ms.endswith("if"):
        fs = ms[:-1] + "ve"  # active
    elif ms.endswith("er"):
        fs = ms[:-2] + "ère"  # financière
    else:
        fs = ms + "e"
    mp = ms[:-2] + "aux" if ms.endswith("al") else _fr_plural(ms)
    return ms, fs, mp, fs + "s"


def _en_third_person(base: str) -> str:
    return _en_plural(base)  # same spelling rules: studies, publishes, votes


def _en_past(base: str) -> str:
    if base.endswith("e"):
        return base + "d"
    if base.endswith("y") and base[-2] not in "aeiou":
        return base[:-1] + "ied"
    return base + "ed"


def _fr_verb_forms(inf: str) -> tuple[tuple[str, str], tuple[str, str], str]:
    if inf in _FR_IRREGULAR_VERBS:
        return _FR_IRREGULAR_VERBS[inf]
    stem = inf[:-2]
    future = (inf + "a", inf + "ont")
    if inf.endswith("er"):
        return (stem + "e", stem + "ent"), future, stem + "é"
    if inf.endswith("ir"):  # regular second group: réagir, établir
        return (stem + "it", stem + "issent"), future, stem + "i"
    raise ValueError(f"no conjugation rule for {inf!r}")


def _make_verb(en: str, fr: str, transitive: bool) -> Verb:
    past, pp = _EN_IRREGULAR_VERBS.get(en, (_en_past(en), _en_past(en)))
    present, future, fr_pp = _fr_verb_forms(fr)
    return Verb(en, _en_third_person(en), past, pp, present, future, fr_pp, transitive)


NOUNS: tuple[Noun, ...] = tuple(
    Noun(en, _en_plural(en), fr, _fr_plural(fr), g, agent)  # type: ignore[arg-type]
    for agent, table in ((True, _AGENT_NOUNS), (False, _THING_NOUNS))
    for en, fr, g in _entries(table)
)
ADJECTIVES: tuple[Adjective, ...] = tuple(
    Adjective(en, _fr_adjective_forms(fr)) for en, fr in _entries(_ADJECTIVES)
)
VERBS: tuple[Verb, ...] = tuple(
    _make_verb(en, fr, transitive)
    for transitive, table in ((True, _TRANSITIVE_VERBS), (False, _INTRANSITIVE_VERBS))
    for en, fr in _entries(table)
)
AGENTS = tuple(n for n in NOUNS if n.agent)
THINGS = tuple(n for n in NOUNS if not n.agent)
TRANSITIVE = tuple(v for v in VERBS if v.transitive)
INTRANSITIVE = tuple(v for v in VERBS if not v.transitive)
