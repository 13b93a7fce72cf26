"""Build or load Hugging Face masked-LM models; offline backbone import."""
