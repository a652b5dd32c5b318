"""The unit tier's guard (tests/conftest.py): a test marked ``unit`` can open no network socket
and make no AWS API call, moto's included, so `make unit` needs neither."""

from __future__ import annotations

import socket

import boto3
import pytest
from moto import mock_aws
from pytest_socket import SocketBlockedError

pytestmark = pytest.mark.unit


def test_a_unit_test_opens_no_network_socket() -> None:
    with pytest.raises(SocketBlockedError):
        socket.socket(socket.AF_INET, socket.SOCK_STREAM)


def test_a_unit_test_makes_no_aws_call_not_even_on_moto() -> None:
    with mock_aws():
        client = boto3.client("sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
        with pytest.raises(AssertionError, match=r"sqs\.ListQueues in a test marked 'unit'"):
            client.list_queues()
