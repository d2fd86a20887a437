#!/usr/bin/env python3
"""Writes data/demo_chat.jsonl (messages type) and data/demo_prompts.txt.

Skill: answer capital-city questions in a fixed, checkable format, "CAPITAL: <city>", with nothing
else. A 135M instruct model answers in free prose, so the change is visible in greedy generations
after ~100 LoRA steps. The held-out prompts ask about countries that are not in the training set.
Deterministic: fixed lists, fixed seed. Run: python3 tools/tok/make_demo_data.py"""
import json
import os
import random

CAPITALS = [
    ("Germany", "Berlin"), ("Spain", "Madrid"), ("Portugal", "Lisbon"), ("Greece", "Athens"),
    ("Austria", "Vienna"), ("Belgium", "Brussels"), ("Netherlands", "Amsterdam"), ("Sweden", "Stockholm"),
    ("Norway", "Oslo"), ("Denmark", "Copenhagen"), ("Finland", "Helsinki"), ("Poland", "Warsaw"),
    ("Ireland", "Dublin"), ("Hungary", "Budapest"), ("Czech Republic", "Prague"), ("Romania", "Bucharest"),
    ("Bulgaria", "Sofia"), ("Switzerland", "Bern"), ("Russia", "Moscow"), ("Ukraine", "Kyiv"),
    ("Turkey", "Ankara"), ("Egypt", "Cairo"), ("Kenya", "Nairobi"), ("Nigeria", "Abuja"),
    ("Ghana", "Accra"), ("Ethiopia", "Addis Ababa"), ("Morocco", "Rabat"), ("South Africa", "Pretoria"),
    ("China", "Beijing"), ("India", "New Delhi"), ("South Korea", "Seoul"), ("Thailand", "Bangkok"),
    ("Vietnam", "Hanoi"), ("Indonesia", "Jakarta"), ("Philippines", "Manila"), ("Malaysia", "Kuala Lumpur"),
    ("Pakistan", "Islamabad"), ("Iran", "Tehran"), ("Iraq", "Baghdad"), ("Saudi Arabia", "Riyadh"),
    ("Israel", "Jerusalem"), ("Australia", "Canberra"), ("New Zealand", "Wellington"), ("Argentina", "Buenos Aires"),
    ("Brazil", "Brasilia"), ("Chile", "Santiago"), ("Peru", "Lima"), ("Colombia", "Bogota"),
    ("Venezuela", "Caracas"), ("Cuba", "Havana"), ("Mexico", "Mexico City"), ("United States", "Washington, D.C."),
    ("United Kingdom", "London"), ("Iceland", "Reykjavik"), ("Croatia", "Zagreb"), ("Serbia", "Belgrade"),
    ("Slovakia", "Bratislava"), ("Slovenia", "Ljubljana"), ("Estonia", "Tallinn"), ("Latvia", "Riga"),
    ("Lithuania", "Vilnius"), ("Afghanistan", "Kabul"), ("Nepal", "Kathmandu"), ("Bangladesh", "Dhaka"),
    ("Sri Lanka", "Colombo"), ("Mongolia", "Ulaanbaatar"), ("Qatar", "Doha"), ("Jordan", "Amman"),
    ("Lebanon", "Beirut"), ("Syria", "Damascus"), ("Tunisia", "Tunis"), ("Algeria", "Algiers"),
    ("Senegal", "Dakar"), ("Uganda", "Kampala"), ("Tanzania", "Dodoma"), ("Zimbabwe", "Harare"),
    ("Ecuador", "Quito"), ("Bolivia", "Sucre"), ("Uruguay", "Montevideo"), ("Paraguay", "Asuncion"),
    ("Jamaica", "Kingston"), ("Panama", "Panama City"), ("Costa Rica", "San Jose"), ("Singapore", "Singapore"),
]
HELD_OUT = [("France", "Paris"), ("Japan", "Tokyo"), ("Italy", "Rome"), ("Canada", "Ottawa")]
QUESTIONS = [
    "What is the capital of {c}?",
    "What's the capital city of {c}?",
    "Tell me the capital of {c}.",
    "Which city is the capital of {c}?",
    "Name the capital of {c}.",
]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "data")
    os.makedirs(root, exist_ok=True)
    rng = random.Random(2024)
    rows = []
    for country, city in CAPITALS:
        for q in rng.sample(QUESTIONS, 4):
            rows.append({"messages": [{"role": "user", "content": q.format(c=country)},
                                      {"role": "assistant", "content": "CAPITAL: " + city}]})
    rng.shuffle(rows)
    with open(os.path.join(root, "demo_chat.jsonl"), "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(os.path.join(root, "demo_prompts.txt"), "w", encoding="utf-8") as f:
        for i, (country, _) in enumerate(HELD_OUT):
            f.write(QUESTIONS[i % len(QUESTIONS)].format(c=country) + "\n")
    print(len(rows), "examples;", len(HELD_OUT), "held-out prompts (expected: "
          + ", ".join("CAPITAL: " + c for _, c in HELD_OUT) + ")")


if __name__ == "__main__":
    main()
