"""Shared by the client-matrix suites (tests/e2e/clients/test_*.py): a `ninfer serve` on the
bundled demo model (models/ninfer-demo, started through tests/e2e/server/server_util.Server), the
pydantic models and JSON schemas the suites ask for, and a schema check.

The demo model is tiny and weak: its free text is arbitrary, so the suites assert what the
server guarantees (forced tool calls and json_schema outputs are constrained decoding, so they
validate; streamed text is non-empty and equals what the client assembles), never literal words.

env: NINFER_BIN, NINFER_SOURCE_DIR
"""
import os
import sys
from typing import List, Literal

import jsonschema_rs
from pydantic import BaseModel, Field

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "server"))
from server_util import KEY, ROOT, Server  # noqa: E402,F401

DEMO = os.path.join(ROOT, "models", "ninfer-demo")
MODEL = "ninfer-demo"  # the served name: the model directory's name
NO_THINK = {"chat_template_kwargs": {"enable_thinking": False}}
USER = [{"role": "user", "content": "What is the weather in Paris, in celsius, for 3 days?"}]


def demo_server(*extra):
    """One server per suite; --reasoning-budget bounds thinking where a request leaves it on."""
    return Server("--reasoning-budget", "32", *extra, model=DEMO)


class Weather(BaseModel):
    """Arguments of get_weather."""
    city: str = Field(min_length=1, max_length=40, description="City name")
    unit: Literal["celsius", "fahrenheit"]
    days: int = Field(ge=1, le=10)


class Person(BaseModel):
    """A person, as structured output."""
    name: str = Field(min_length=1, max_length=40)
    age: int = Field(ge=0, le=150)
    tags: List[str] = Field(max_length=3)
    role: Literal["admin", "user"]


WEATHER_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1, "maxLength": 40},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["city", "unit", "days"],
    "additionalProperties": False,
}
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather",
                                                 "description": "Weather of a city",
                                                 "parameters": WEATHER_SCHEMA}}
TIME_SCHEMA = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 20}},
               "required": ["zone"], "additionalProperties": False}
TIME_TOOL = {"type": "function", "function": {"name": "get_time", "description": "Time in a zone",
                                              "parameters": TIME_SCHEMA}}
SCHEMAS = {"get_weather": WEATHER_SCHEMA, "get_time": TIME_SCHEMA}


def valid(schema, value):
    """Whether `value` validates against the JSON schema (with the error for a message)."""
    try:
        jsonschema_rs.validate(schema, value)
        return True, ""
    except jsonschema_rs.ValidationError as e:
        return False, str(e)
