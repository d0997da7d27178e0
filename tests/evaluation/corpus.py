"""A seeded corpus of realistic model outputs, generated broadly by class.

Each generator returns ``CorpusItem``s: a sample (what the scorer sees) and one
answer written the way models write them, drawn from a family of templates per
class (chain-of-thought endings, bare letters, boxed forms, rationales that walk
through the options, self-corrections, markdown, Gorilla-style dicts, ...). The
templates are combined with random fillers, option texts and letters, so the
corpus exercises the rules rather than a list of examples. Nothing here comes from
an upstream dataset; the APIBench records only follow its schema.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from pytest_evomemory.core.types import BenchmarkSample

LETTERS = "ABCDEFGHIJ"


@dataclass(frozen=True)
class CorpusItem:
    sample: BenchmarkSample
    answer: str
    kind: str
    extra: dict[str, object] = field(default_factory=dict)


# --------------------------------------------------------------------------- text

_SENTENCES = [
    "Let's think step by step.",
    "First, recall the definition and apply it to the given values.",
    "A higher rate would shift the curve to the left.",
    "The total is 12 plus 30, which gives 42.",
    "We can rule out the trivial case immediately.",
    "This follows from conservation of energy.",
    "Note that the question asks for the net effect, not the gross one.",
    "I need to be careful with the units here.",
    "Consider the limiting case where x goes to zero.",
    "In that case the ratio is 3:1.",
    "The key observation is that the function is monotone.",
    "So the result must be positive.",
    "Hmm, that seems too large; let me recompute.",
    "Plugging in, we get about 4.7 times the original value.",
    "By symmetry, the two remaining terms cancel.",
    "That matches what we expect from theory.",
]


def _prose(rng: random.Random, low: int = 1, high: int = 5) -> str:
    return " ".join(rng.choice(_SENTENCES) for _ in range(rng.randint(low, high)))


_OPTION_WORDS = [
    "an increase in aggregate demand", "a fall in the price level", "higher unemployment",
    "a budget surplus", "stagflation", "none of the above", "Vitamin D", "Type I error",
    "Hepatitis B", "utilitarianism", "the categorical imperative", "Plato's Republic",
    "moral realism", "a trade deficit", "lower interest rates", "Kant", "Hume",
    "the tensile stress", "a Carnot engine", "Ohm's law", "the Z-transform",
    "Phase A leads phase B", "Grade C steel", "Class E amplifier",
]


def _options(rng: random.Random, count: int) -> tuple[str, ...]:
    pool = list(_OPTION_WORDS)
    rng.shuffle(pool)
    options: list[str] = []
    while len(options) < count:
        if rng.random() < 0.5 and pool:
            options.append(pool.pop())
        else:
            value = f"{rng.randint(1, 999) / 10:.1f} {rng.choice(['eV', 'K', 'kJ', 'm/s', 'N', '%', 'dB'])}"
            if value not in options:
                options.append(value)
    return tuple(options)


# --------------------------------------------------------------------------- choice


def _choice_answer(rng: random.Random, options: tuple[str, ...], target: str) -> tuple[str, str]:
    """One answer and its class; the named letter is right about half the time."""
    n = len(options)
    letters = LETTERS[:n]
    pick = target if rng.random() < 0.5 else rng.choice(letters)
    other = rng.choice([x for x in letters if x != pick] or [pick])
    text = options[letters.index(pick)]
    p = _prose(rng)
    kinds: list[tuple[str, str]] = [
        ("cot_answer_is", f"{p}\nThe answer is ({pick})."),
        ("cot_answer_is_plain", f"{p} Therefore, the answer is {pick}."),
        ("cot_answer_colon", f"{p}\n\nAnswer: {pick}"),
        ("final_answer_label", f"Rationale: {p}\nFinal Answer: {pick}"),
        ("markdown", f"{p}\n\n**Answer:** {pick}"),
        ("markdown_answer_is", f"{p}\n**The answer is ({pick})**"),
        ("bare", rng.choice([pick, f"({pick})", f"{pick}.", pick.lower(), f"[{pick}]"])),
        ("label_and_text", f"{pick}. {text}"),
        ("paren_label_and_text", f"({pick}) {text}"),
        ("option_text", text),
        ("answer_is_text", f"{p} The answer is {text}."),
        ("boxed", f"{p} So the final answer is $\\boxed{{{pick}}}$."),
        ("boxed_text", f"{p}\n\\boxed{{\\text{{{pick}}}}}"),
        ("walkthrough", " ".join(
            f"{letters[i]}. {options[i]} - {'correct' if letters[i] == pick else rng.choice(['incorrect', 'wrong', 'not it'])}."
            for i in range(n)) + f" Hence {pick}"),
        ("walkthrough_answer", "\n".join(
            f"{letters[i]}) {options[i]}: {rng.choice(['too small', 'too large', 'irrelevant', 'fits'])}"
            for i in range(n)) + f"\nSo the answer is ({pick})."),
        ("self_correction", f"The answer is ({other}). Wait, I made an error. {p} The answer is ({pick})."),
        ("colon_self_correction", f"Answer: {other}\n{p}\nActually, Answer: {pick}"),
        ("prose_letters", f"Option {other} is tempting, but {p} Option {pick} is correct."),
        ("prose_last_letter", f"{other} is wrong because {p.lower()} so {pick}"),
        ("answer_is_word", f"{p} The answer is {rng.choice(['Carbon', 'Definitely', 'Both', 'Economic'])} related."),
        ("clearly", f"{p}\nAnswer: {rng.choice(['Clearly', 'Both', 'Based on this,', 'Definitely'])} {pick}"),
        ("nothing", rng.choice(["I cannot determine this from the information given.",
                                "none of these seem right", f"{p.lower()}"])),
        ("lowercase", f"{p} the answer is ({pick.lower()})"),
        ("pronoun_i", f"{p}\nI believe {pick} is right. I hope this helps!"),
        ("out_of_range", f"{p} The answer is ({LETTERS[min(n, 9)] if n < 10 else 'J'})."),
        ("article_a", f"{p} A careful reading shows {pick} fits best."),
        ("answer_colon_paren", f"{p}\nAnswer: ({pick})"),
        ("option_word", f"{p}\nThe correct option is {pick}."),
        ("boxed_then_prose", f"$\\boxed{{{pick}}}$ because {other} ignores the constraint."),
        ("answer_is_colon", f"{p}\nThe correct answer is: {pick}"),
        ("bold_paren", f"{p}\n**Answer: ({pick})**"),
        ("no_space_colon", f"{p}\nAnswer:{pick}"),
        ("answer_then_explanation", f"Answer: {pick}\n\nExplanation: {p} {other} is wrong."),
        ("two_options", f"{p} The answer is ({pick}) or possibly ({other})."),
        ("latex_text", f"{p} $\\text{{({pick})}}$"),
        ("heading", f"### Reasoning\n{p}\n### Answer\n{pick}"),
        ("hedge", f"I think it's {other}, but {pick} is also plausible."),
        ("answer_word_then_letter", f"{p}\nAnswer: The correct option is {pick}"),
        ("text_then_answer_is", f"{p} The answer is {text}, i.e. ({pick})."),
        ("final_bold", f"{p}\nFinal answer: **{pick}**"),
    ]
    kind, answer = rng.choice(kinds)
    return answer, kind


def choice_corpus(seed: int, size: int, stream: str, mode: str, counts: tuple[int, ...]) -> list[CorpusItem]:
    rng = random.Random(seed)
    items = []
    for index in range(size):
        options = _options(rng, rng.choice(counts))
        target = rng.choice(LETTERS[: len(options)])
        sample = BenchmarkSample(f"{stream}_{index}", stream, index, "Q", target, mode, options)
        answer, kind = _choice_answer(rng, options, target)
        items.append(CorpusItem(sample, answer, kind))
    return items


def mmlu_pro_corpus(seed: int = 15, size: int = 1200) -> list[CorpusItem]:
    return choice_corpus(seed, size, "mmlu_pro", "choice", (4, 6, 8, 9, 10, 10, 10))


_GPQA_EXTRA = [
    "upper_colon", "no_space", "bold_letter", "or_other", "boxed_after_colon", "answer_is_then_colon",
    "early_then_final", "final_line", "final_line", "dollar", "markdown_colon", "paren_colon",
    "lower_final", "article", "word_after_colon", "answer_is_only", "boxed_only", "bare_only",
]


def gpqa_corpus(seed: int = 16, size: int = 600) -> list[CorpusItem]:
    """GPQA outputs: the MMLU-Pro classes plus the forms simple-evals' prompt elicits."""
    rng = random.Random(seed)
    items = choice_corpus(seed, size // 2, "gpqa_diamond", "gpqa", (4,))
    for index in range(size // 2, size):
        options = _options(rng, 4)
        target = rng.choice("ABCD")
        sample = BenchmarkSample(f"gpqa_{index}", "gpqa_diamond", index, "Q", target, "gpqa", options)
        pick = target if rng.random() < 0.5 else rng.choice("ABCD")
        other = rng.choice([x for x in "ABCD" if x != pick])
        p = _prose(rng)
        kind = rng.choice(_GPQA_EXTRA)
        answer = {
            "early_then_final": f"At first glance the answer is ({other}). {p}\n\nAnswer: {pick}",
            "final_line": f"{p}\n\nAnswer: {pick}",
            "dollar": f"{p}\nAnswer: ${pick}$",
            "markdown_colon": f"{p}\n**Answer:** {pick}",
            "paren_colon": f"{p}\nAnswer: ({pick})",
            "lower_final": f"{p}\nanswer: {pick.lower()}",
            "article": f"To find the answer: a careful estimate is needed. {p}\nAnswer: {pick}",
            "word_after_colon": f"{p}\nAnswer: {rng.choice(['Both', 'Clearly', 'Definitely', 'Based on the above,'])} {pick}",
            "answer_is_only": f"{p} The answer is ({pick}).",
            "boxed_only": f"{p} $\\boxed{{{pick}}}$",
            "bare_only": pick,
            "upper_colon": f"{p}\nANSWER: {pick}",
            "no_space": f"{p}\nAnswer:{pick}",
            "bold_letter": f"{p}\nAnswer: **{pick}**",
            "or_other": f"{p}\nAnswer: {pick} or {other}",
            "boxed_after_colon": f"{p}\nAnswer: $\\boxed{{{pick}}}$",
            "answer_is_then_colon": f"{p} So the answer is {other}? No.\nAnswer: {pick}",
        }[kind]
        items.append(CorpusItem(sample, answer, kind))
    return items


# --------------------------------------------------------------------------- AIME


def aime_corpus(seed: int = 17, size: int = 600) -> list[CorpusItem]:
    rng = random.Random(seed)
    items = []
    for index in range(size):
        gold = rng.randint(0, 999)
        target = f"{gold:03d}" if rng.random() < 0.25 else str(gold)
        value = gold if rng.random() < 0.6 else rng.randint(0, 999)
        small = rng.randint(2, 30)
        p = _prose(rng, 1, 3)
        kinds = [
            ("boxed", f"{p} Therefore the answer is $\\boxed{{{value}}}$."),
            ("boxed_plain", f"{p}\n\\boxed{{{value}}}"),
            ("answer_is", f"{p} The answer is {value}."),
            ("final_answer", f"{p}\nFinal Answer: {value}"),
            ("markdown", f"{p}\n**Answer:** {value}"),
            ("bare", str(value)),
            ("padded", f"{value:03d}"),
            ("dollar", f"${value}$"),
            ("prose_count", f"With n = {small} fixed, there are {value} ways."),
            ("prose_equation", f"{p} Since k = {small}, the total number is {value}."),
            ("mathbf", f"{p} $\\boxed{{\\mathbf{{{value}}}}}$"),
            ("textbf", f"{p} \\boxed{{\\textbf{{{value:03d}}}}}" if rng.random() < 0.3 else f"{p} \\boxed{{\\textbf{{{value}}}}}"),
            ("frac", f"{p} $\\boxed{{\\frac{{{2 * value}}}{{2}}}}$"),
            ("two_boxed", f"We first get $\\boxed{{{small}}}$, but that ignores a case. Final: $\\boxed{{{value}}}$"),
            ("fbox", f"{p} \\fbox{{{value}}}"),
            ("sum_statement", f"{p} So m + n = {value}."),
            ("check_after", f"So the answer is {value}. Let me double-check: {small} + {value - small} = {value}."),
            ("degrees", f"{p} The angle is $\\boxed{{{value}^\\circ}}$."),
            ("words_after", f"{p} The answer is {value} apples."),
            ("nothing", f"{p} I could not finish the computation."),
            ("equals_last", f"{p} Thus $a+b = {small} + {value - small} = {value}$."),
            ("mod", f"{p} The remainder is {value} (mod 1000)."),
            ("bold_heading_display", f"{p}\n**Final Answer**\n\\[ \\boxed{{{value}}} \\]"),
            ("i_hope", f"{p} The final answer is ${value}$. I hope it is correct."),
            ("answer_frac", f"{p} answer: $\\frac{{{3 * value}}}{{3}}$"),
            ("boxed_padded", f"{p} $\\boxed{{{value:03d}}}$"),
            ("boxed_period", f"\\boxed{{{value}}}."),
            ("equiv", f"{p} Thus $N \\equiv {value} \\pmod{{1000}}$."),
            ("probability", f"The probability is {small}/{small + 1}, so m + n = {2 * small + 1}."),
            ("float", f"{value}.0"),
            ("two_solutions", f"$x = {small}$ or $x = {value}$, and we take the larger, {max(small, value)}."),
            ("answer_adverb", f"So the answer is {rng.choice(['clearly', 'therefore', 'at least', 'now'])} {value}, "
                              f"which uses {small} colors."),
            ("answer_colon_prose", f"answer: there are {value} such numbers out of {small + 1000}"),
            ("chained_equals", f"The answer is $m + n = {small} + {value - small} = {value}$."),
            ("box_then_final_correction", f"So $\\boxed{{{small}}}$. Wait, I made an error; the final answer is {value}."),
            ("final_then_box", f"The final answer is {small}. But checking again, \\boxed{{{value}}}"),
            ("minerva_after_box", f"$\\boxed{{{value}}}$\nFinal Answer: The final answer is ${value}$. I hope it is correct."),
            ("thousands_then_answer", f"We discard the 1,000 invalid strings, leaving {value}."),
            ("thousands_last", f"{p} In total {1000 + value:,} strings."),
            ("percent", f"{p} The answer is {value}%"),
            ("display_equals", f"{p}\n$$N = {small} \\cdot 3 + {value - 3 * small} = {value}$$"),
        ]
        kind, answer = rng.choice(kinds)
        sample = BenchmarkSample(f"aime_{index}", "aime_2024", index, "Q", target, "aime")
        items.append(CorpusItem(sample, answer, kind, {"gold": gold}))
    return items


# --------------------------------------------------------------------------- APIBench


@dataclass(frozen=True)
class HubApi:
    """One hub API as an APIBench record names it (its reference ``api_call`` spelling)."""

    repo: str
    model: str
    domain: str
    variant: str = ""  # MEAL-V2-style entry points take the variant positionally
    extra: str = "pretrained=True"  # the reference's further arguments
    code_extra: str = "pretrained=True"  # what the record's runnable code passes

    @property
    def reference(self) -> str:
        if self.variant:  # the upstream spelling that is not valid Python
            return f"torch.hub.load(repo_or_dir='{self.repo}', '{self.model}', model='{self.variant}', {self.extra})"
        return f"torch.hub.load(repo_or_dir='{self.repo}', model='{self.model}', {self.extra})"

    def runnable(self, quote: str = "'") -> str:
        q = quote
        variant = f", {q}{self.variant}{q}" if self.variant else ""
        extra = f", {self.code_extra}" if self.code_extra else ""
        return f"torch.hub.load({q}{self.repo}{q}, {q}{self.model}{q}{variant}{extra})"


HUB_APIS: tuple[HubApi, ...] = (
    HubApi("pytorch/vision", "resnet50", "Classification"),
    HubApi("pytorch/vision", "resnet18", "Classification"),
    HubApi("pytorch/vision", "wide_resnet50_2", "Classification"),
    HubApi("pytorch/vision", "densenet121", "Classification"),
    HubApi("pytorch/vision", "mobilenet_v2", "Classification"),
    HubApi("pytorch/vision", "vgg16", "Classification"),
    HubApi("pytorch/vision", "deeplabv3_resnet50", "Semantic Segmentation"),
    HubApi("pytorch/vision", "fcn_resnet101", "Semantic Segmentation"),
    HubApi("ultralytics/yolov5", "yolov5s", "Object Detection"),
    HubApi("ultralytics/yolov5", "yolov5x", "Object Detection"),
    HubApi("facebookresearch/pytorchvideo", "slow_r50", "Video Classification"),
    HubApi("facebookresearch/pytorchvideo", "x3d_s", "Video Classification"),
    HubApi("NVIDIA/DeepLearningExamples:torchhub", "nvidia_ssd", "Object Detection"),
    HubApi(
        "NVIDIA/DeepLearningExamples:torchhub", "nvidia_gpunet", "Classification",
        extra="pretrained=True, model_type=model_type, model_math=precision",
        code_extra="pretrained=True, model_type=model_type, model_math=precision",
    ),
    HubApi("NVIDIA/DeepLearningExamples:torchhub", "nvidia_tacotron2", "Text-To-Speech",
           extra="model_math='fp16'", code_extra="model_math='fp16'"),
    HubApi("szq0214/MEAL-V2", "meal_v2", "Classification", variant="mealv2_resnest50_cutmix"),
    HubApi("szq0214/MEAL-V2", "meal_v2", "Classification", variant="mealv2_mobilenetv3_small_075"),
    HubApi("szq0214/MEAL-V2", "meal_v2", "Classification", variant="mealv2_efficientnet_b0"),
    HubApi(
        "nicolalandro/ntsnet-cub200", "ntsnet", "Fine-grained Classification",
        extra="pretrained=True, **{'topN': 6, 'device':'cpu', 'num_classes': 200}",
        code_extra="pretrained=True, **{'topN': 6, 'device':'cpu', 'num_classes': 200}",
    ),
    HubApi("snakers4/silero-models", "silero_stt", "Speech-To-Text",
           code_extra="language='en', device=device"),
    HubApi("facebookresearch/pytorch_GAN_zoo:hub", "PGAN", "Image Generation",
           code_extra="model_name='celebAHQ-512', pretrained=True, useGPU=use_gpu"),
    HubApi("intel-isl/MiDaS", "DPT_Large", "Depth Estimation", extra="pretrained=True"),
    HubApi("intel-isl/MiDaS", "MiDaS_small", "Depth Estimation", extra="pretrained=True"),
    HubApi("facebookresearch/WSL-Images", "resnext101_32x8d_wsl", "Classification"),
    HubApi("PingoLH/Pytorch-HarDNet", "hardnet68", "Classification"),
    HubApi("mit-han-lab/ProxylessNAS", "proxylessnas_gpu", "Classification"),
)

_REQUESTS = [
    "I need an API that can {task} for my {place} project.",
    "Suggest a pretrained model to {task} on a phone.",
    "Which API can {task} quickly?",
    "Our {place} team wants to {task}. Provide a suitable API.",
]
_TASKS = {
    "Classification": "label the objects in photos",
    "Semantic Segmentation": "segment street scenes pixel by pixel",
    "Object Detection": "find and box the cars in camera frames",
    "Video Classification": "recognise activities in short clips",
    "Text-To-Speech": "read text aloud",
    "Fine-grained Classification": "tell bird species apart",
    "Speech-To-Text": "transcribe recorded interviews",
    "Image Generation": "generate synthetic faces",
    "Depth Estimation": "estimate depth from a single image",
}


def toolbench_record(api: HubApi, rng: random.Random) -> dict[str, object]:
    """One record in the upstream ``torchhub_eval.json`` schema (authored, not copied)."""
    request = rng.choice(_REQUESTS).format(task=_TASKS[api.domain], place=rng.choice(["retail", "museum", "farm"]))
    runnable = api.runnable()
    output = {
        "domain": api.domain,
        "api_call": f"model = {api.runnable()}" if not api.variant else f"model = {api.reference.replace('repo_or_dir=', '')}",
        "api_provider": "PyTorch",
        "explanation": f"Load the {api.model} model from PyTorch Hub.",
        "code": f"import torch\nmodel = {runnable}",
    }
    return {
        "code": f"###Instruction: {request}\n###Output: {output!r}\n",
        "api_call": api.reference,
        "provider": "PyTorch",
        "api_data": {
            "domain": api.domain,
            "framework": "PyTorch",
            "functionality": api.model,
            "api_name": api.model,
            "api_call": api.reference,
            "api_arguments": {"pretrained": "True"},
            "python_environment_requirements": ["torch"],
            "example_code": ["import torch", f"model = {runnable}", "model.eval()"],
            "performance": {"dataset": "ImageNet", "accuracy": "n/a"},
            "description": f"{api.model} from {api.repo}.",
        },
        "_api": api,
    }


#: Upstream, 3 of 186 records' runnable code omits an argument of their reference
#: (Silero's ``pretrained=True``); the corpus keeps such records about as rare.
_WEIGHTS = [0.3 if api.model == "silero_stt" else 1.0 for api in HUB_APIS]


def toolbench_records(seed: int = 18, size: int = 120) -> list[dict[str, object]]:
    rng = random.Random(seed)
    return [toolbench_record(api, rng) for api in rng.choices(HUB_APIS, weights=_WEIGHTS, k=size)]


def _tool_answer(rng: random.Random, record: dict[str, object]) -> tuple[str, str]:
    api = record["_api"]
    assert isinstance(api, HubApi)
    chosen = api if rng.random() < 0.55 else rng.choice(HUB_APIS)
    q = rng.choice(["'", '"'])
    call = chosen.runnable(q)
    keyword = f"torch.hub.load(repo_or_dir={q}{chosen.repo}{q}, model={q}{chosen.model}{q}" + (
        f", {q}{chosen.variant}{q}" if chosen.variant else "") + (f", {chosen.code_extra})" if chosen.code_extra else ")")
    versioned = call.replace(f"{q}pytorch/vision{q}", f"{q}pytorch/vision:v0.10.0{q}")
    explanation = f"Load the pretrained {chosen.model} model from PyTorch Hub."
    kinds = [
        ("gorilla_dict", f"{{'domain': '{chosen.domain}', 'api_call': \"model = {call}\", 'api_provider': 'PyTorch', "
                         f"'explanation': '{explanation}', 'code': 'import torch\\nmodel = {call}'}}"),
        ("gorilla_tags", f"<<<domain>>>: {chosen.domain}, <<<api_call>>>: {keyword}, <<<api_provider>>>: PyTorch, "
                         f"<<<explanation>>>: {explanation}"),
        ("code_fence", f"You can use this:\n```python\nimport torch\nmodel = {versioned}\nmodel.eval()\n```"),
        ("one_liner", call),
        ("keyword_form", keyword),
        ("no_pretrained", f"api_call: {call.replace(', pretrained=True', '')}"),
        ("pretrained_false", f"api_call: {call.replace('pretrained=True', 'pretrained=False')}"),
        ("torchvision_direct", f"api_call: torchvision.models.{chosen.model}(pretrained=True)"),
        ("hallucinated", f"api_call: torch.hub.load('{chosen.repo}', '{chosen.model}_v9', pretrained=True)"),
        ("two_calls", f"api_call: model = {HUB_APIS[0].runnable()} # or better: {call}"),
        ("prose_only", f"I would recommend {chosen.model} from {chosen.repo} on PyTorch Hub."),
        ("versioned_dict", f"{{'api_call': \"{versioned}\", 'api_provider': 'PyTorch'}}"),
        ("escaped_quotes", f"{{'domain': '{chosen.domain}', 'api_call': 'model = {chosen.runnable(chr(92) + chr(39))}', "
                           "'api_provider': 'PyTorch'}"),
        ("entry_point_skipped", f"api_call: torch.hub.load('{chosen.repo}', '{chosen.variant or chosen.model}', pretrained=True)"),
    ]
    kind, answer = rng.choice(kinds)
    return answer, kind


def toolbench_corpus(seed: int = 19, size: int = 360) -> list[CorpusItem]:
    rng = random.Random(seed)
    records = toolbench_records(seed, size)
    items = []
    for index, record in enumerate(records):
        answer, kind = _tool_answer(rng, record)
        sample = BenchmarkSample(
            f"torchhub_{index + 1}", "toolbench", index, "Q", str(record["api_call"]), "toolbench",
            metadata={"domain": record["api_data"]["domain"]},  # type: ignore[index]
        )
        items.append(CorpusItem(sample, answer, kind, {"record": record}))
    return items
